"""What the commands that measure (``run`` and ``ab``) share once their options are parsed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from fuseci.cli.output import Terminal, error, report, say
from fuseci.errors import EXIT_REGRESSION, EXIT_SETUP, FuseciError

if TYPE_CHECKING:
    from fuseci.api.session import Progress
    from fuseci.judge.verdict import Comparison


class Judged(Protocol):
    """What a session concluded: a comparison per suite."""

    @property
    def comparisons(self) -> tuple[Comparison, ...]:
        """One per suite, in order."""


JudgedT = TypeVar("JudgedT", bound=Judged)
#: What keeps a session's outcome as a run file, given the exit code so far; the code after it.
Keep = Callable[[JudgedT, int], int] | None


def suite_inputs(check: Any) -> list[tuple[Path, str]]:
    """Every suite file a command read, valid or not, as inputs no report may replace."""
    found = [(s.path, f"the suite file of {s.name!r}") for s in check.suites]
    return found + [(p.path, "a suite file") for p in check.problems]


def suite_problems(terminal: Terminal, check: Any, outputs: dict[str, Path]) -> int:
    """Every problem of the suite files, one ``fuseci: error:`` line each and in the report files; exit 3."""
    from fuseci.api.suites import check_report

    for p in check.problems:
        error(p.message)
    return report(terminal, check_report(check, every_file=False), outputs, EXIT_SETUP, console=False)


def measure_and_report(
    terminal: Terminal,
    outputs: dict[str, Path],
    session: Callable[[Progress], JudgedT],
    keep: Keep[JudgedT],
    *,
    quiet: bool,
    verbose: bool,
) -> int:
    """Run ``session`` while progress is shown, then report its comparisons; ``keep`` saves the run file."""
    from fuseci.cli.progress import RunDisplay, choose
    from fuseci.judge.verdict import exit_code
    from fuseci.reporters import console

    with RunDisplay(choose(quiet), terminal, lambda c: console.suite_report(c, verbose=verbose)) as display:
        outcome = session(display)
    comparisons = list(outcome.comparisons)
    return report(
        terminal,
        comparisons,
        outputs,
        exit_code(comparisons),
        tables_shown=display.printed == len(comparisons),
        verbose=verbose,
        keep=None if keep is None else lambda code: keep(outcome, code),
    )


def keeper(
    directory: Path | None, save: Callable[[JudgedT, Path], Path | None], what: str = "results"
) -> Keep[JudgedT]:
    """What keeps a session's run file in ``directory`` (None: nothing is kept) with ``save``, and
    names it; the exit code so far comes back, turned to 3 (unless 1) when it cannot be saved."""
    if directory is None:
        return None

    def keep(outcome: JudgedT, code: int) -> int:
        try:
            path = save(outcome, directory)
        except FuseciError as exc:
            error(str(exc))
            return code if code == EXIT_REGRESSION else exc.exit_code
        if path is None:
            say(f"fuseci: no suite was measured; no run file written to {directory}", err=True)
        else:
            say(f"fuseci: {what} saved to {path}", err=True)
        return code

    return keep


def say_pairs(pairs: list[Any], base: Any, head: Any, every: bool) -> None:
    """One line on stderr: what ``fuseci ab`` judges against what, and each suite's state."""
    from fuseci.api.pairs import pair_state, reference_label

    say(f"fuseci: judging {head.label} against {reference_label(base)}", err=True)
    for p in pairs:
        say(f"fuseci:   {p.name} ({p.rel.as_posix()}): {pair_state(p, base, every)}", err=True)
