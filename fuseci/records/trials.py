"""What ``fuseci check --execute`` found: each function of a suite called once on the host, written
by the child process after every call, so that a crash or a hang names the call it happened in."""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from fuseci import validation as v
from fuseci.files.atomic import atomic_write_text
from fuseci.files.versioned import DocumentFormat

FORMAT = DocumentFormat(
    what="trial record",
    name="fuseci-trial-record",
    version=1,
    fix="`fuseci check --execute` writes it; run the check again",
)

#: What the reference is called in a record (a variant by its id).
REFERENCE = "reference"


class Outcome(enum.Enum):
    """How one call ended (the values are what the file holds)."""

    MATCHED = "matched"
    """It ran, and its outputs matched what it was compared with (or it had nothing to be compared with)."""
    WRONG = "wrong"
    """It ran and computed a wrong result."""
    RAISED = "raised"
    """It raised, crashed or did not finish in time."""
    NOT_RUN = "not run here"
    """It could not run on this machine (CuPy without a GPU, code that needs CUDA); not a failure."""


@dataclass(frozen=True, slots=True)
class Trial(v.Document):
    """One function of a case, called once."""

    __always__ = frozenset({"message"})

    case: v.Id
    """Case id."""
    function: v.Id
    """Variant id, or :data:`REFERENCE`."""
    outcome: Annotated[Outcome, v.Choice(tuple(o.value for o in Outcome))]
    """How the call ended."""
    message: v.Text = ""
    """One line: how closely it matched, what it raised and where, or why it could not run."""


@dataclass(frozen=True, slots=True)
class TrialRecord(v.Document):
    """Every call of one suite, in order (a file holds every member)."""

    __always__ = frozenset({"trials", "running", "complete", "note"})

    suite: v.Id
    """Suite id."""
    trials: v.Items[Trial] = ()
    """The calls made so far."""
    running: v.Text = ""
    """``case/function`` being called now (empty between calls): what a crash or hang happened in."""
    complete: bool = False
    """False until every case was tried."""
    note: v.Text = ""
    """What applies to the whole suite (the runtime, the scaled shapes' rule), for the log."""


def write_trials(record: TrialRecord, path: Path) -> None:
    """Write atomically: a reader never sees half a record."""
    atomic_write_text(path, FORMAT.dumps(record.to_json()))


def read_trials(path: Path) -> TrialRecord:
    """Read a record file.

    Raises:
        FileNotFoundError: none was written (the child died before its first write).
        ReportError: unreadable or malformed.
    """
    data = {k: value for k, value in FORMAT.load(path).items() if k not in ("format", "format_version")}
    try:
        return v.validate(TrialRecord, data)
    except v.Invalid as exc:
        raise FORMAT.invalid(path, exc) from None


def trial_argv(suite_path: Path, record: Path) -> list[str]:
    """The child's command line: this Python, ``-m fuseci.harness.trial``."""
    return [sys.executable, "-m", "fuseci.harness.trial", str(suite_path), "--record", str(record)]
