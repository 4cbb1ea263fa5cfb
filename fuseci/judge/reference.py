"""What a run is judged against, and so what its messages advise (:class:`Reference`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Reference:
    """What a run is judged against, and so what its messages advise: the command that makes this
    run the reference, or, for ``fuseci compare``, that the reference is another run, which no
    command of this run's re-records."""

    command: str
    """``fuseci update-baselines suites/x.yaml`` with the options that reproduce this run's
    inputs (``--from-report r.ncu-rep``, ``--baselines b``); empty when the reference is a run."""
    name: str = "the baseline"
    """What messages call it (``run A``)."""

    def missing(self) -> str:
        """Why a value has nothing to be compared with."""
        if self.command:
            return f"no baseline yet (record one with `{self.command}`)"
        return f"{self.name} did not measure it"

    def if_intended(self) -> str:
        """Advice after a change that may be intended (`` (if intended, record it with ...)``)."""
        return f" (if intended, record it with `{self.command}`)" if self.command else ""

    def keep(self) -> str:
        """Advice after an improvement."""
        return " (update the baseline to keep it)" if self.command else ""

    def incomparable(self, fields: str) -> str:
        """Advice after an environment difference that blocks the comparison (``fields``: the
        ``--accept-env`` value that would accept it)."""
        instead = (
            f"re-record with `{self.command}`"
            if self.command
            else f"compare with a {self.name} measured in the same environment"
        )
        return f"; if this is intended, {instead}, or compare anyway with --accept-env {fields}"

    def dropped(self, case: str) -> str:
        """A case the reference has and the suite no longer does."""
        if self.command:
            return f"case {case!r} is in the baseline but not in the suite; `{self.command}` drops it"
        return f"case {case!r} is in {self.name} but not in the suite"
