"""``fuseci check --execute``: every variant and reference of each suite called once on this machine's CPU, in a
child process under a time limit (:mod:`fuseci.harness.trial`): a crash or hang is said at its call, never fatal."""

from __future__ import annotations

import signal
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fuseci.config.model import Suite
from fuseci.errors import EXIT_PASS, EXIT_REGRESSION, EXIT_SETUP, FuseciError
from fuseci.measure.process import one_line, run_logged, tail
from fuseci.records.trials import REFERENCE, Outcome, Trial, read_trials, trial_argv

#: The time one suite's calls may take, all of them (PyTorch's import, Triton's interpreter and
#: CPU compiles included); a call still running then is reported as hung.
EXECUTE_TIMEOUT_S = 600.0

#: How each outcome is said before its message.
_SAID = {
    Outcome.MATCHED: "ran",
    Outcome.WRONG: "wrong result",
    Outcome.RAISED: "raised",
    Outcome.NOT_RUN: "could not run here",
}


@dataclass(frozen=True, slots=True)
class Executed:
    """One suite's calls."""

    suite: Suite
    trials: tuple[Trial, ...]
    """Every call, in order (those a crash or hang kept from running among them)."""
    problem: str = ""
    """Why the suite could not be tried at all (one line); empty when it was."""

    @property
    def failed(self) -> tuple[Trial, ...]:
        """Calls that computed a wrong result or raised."""
        return tuple(t for t in self.trials if t.outcome in (Outcome.WRONG, Outcome.RAISED))

    def line(self, t: Trial) -> str:
        """One call as one line: where the function is named, how it ended and the message."""
        case = next(c for c in self.suite.cases if c.id == t.case)
        if t.function == REFERENCE:
            at, what = case.reference_line, f"case {case.id!r}.reference ({case.reference})"
        else:
            v = next(v for v in case.variants if v.id == t.function)
            at, what = v.line, f"case {case.id!r}.variants.{v.id} ({v.fn})"
        return f"{self.suite.path}:{at}: {what}: {_SAID[t.outcome]}: {t.message}"

    def summary(self) -> str:
        """One line: how many calls ended how."""
        if self.problem:
            return f"{self.suite.path}: not executed: {self.problem}"
        counts = {o: sum(t.outcome is o for t in self.trials) for o in Outcome}
        said = ", ".join(f"{n} {o.value}" for o, n in counts.items() if n)
        return f"{self.suite.path}: suite {self.suite.name}: executed on the CPU: {said or 'nothing to call'}"


def exit_code(executed: Sequence[Executed]) -> int:
    """3 when a suite could not be tried, else 1 when a call was wrong or raised, else 0."""
    if any(e.problem for e in executed):
        return EXIT_SETUP
    return EXIT_REGRESSION if any(e.failed for e in executed) else EXIT_PASS


def execute(suite: Suite, timeout_s: float = EXECUTE_TIMEOUT_S) -> Executed:
    """Call every function of ``suite`` once in a child process (module docstring)."""
    with tempfile.TemporaryDirectory(prefix="fuseci-execute-") as tmp:
        record_path, log_path = Path(tmp) / "trials.json", Path(tmp) / "trials.log"
        argv = trial_argv(suite.path.resolve(), record_path)
        try:
            rc = run_logged(argv, log_path, timeout_s)
            ended = "" if rc == 0 else _death(rc)
        except subprocess.TimeoutExpired:
            ended = f"did not finish within {timeout_s:g} s (a hang?)"
        try:
            record = read_trials(record_path)
        except (FileNotFoundError, FuseciError):
            why = ended or "it wrote no record"
            return Executed(suite, (), f"the process that calls the functions {why}: {one_line(tail(log_path, 5))}")
        if record.complete:
            return Executed(suite, record.trials)
        return Executed(suite, _cut_short(suite, record.trials, record.running, ended or "stopped"))


def _death(rc: int) -> str:
    """How a child that did not exit 0 ended."""
    if rc < 0:
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"exited {rc}"


def _cut_short(suite: Suite, done: tuple[Trial, ...], running: str, ended: str) -> tuple[Trial, ...]:
    """The calls of a child that crashed or hung in ``running``: that call raised, those after it not made."""
    made = {(t.case, t.function) for t in done}
    out = list(done)
    culprit = tuple(running.split("/", 1)) if "/" in running else None
    during = f"case {culprit[0]!r}'s {culprit[1]}" if culprit else "it"
    for case in suite.cases:
        names = ([REFERENCE] if case.reference else []) + [v.id for v in case.variants]
        for name in [n for n in names if (case.id, n) not in made]:
            if (case.id, name) == culprit:
                out.append(Trial(case.id, name, Outcome.RAISED, f"the process {ended} in this call"))
            else:
                out.append(Trial(case.id, name, Outcome.NOT_RUN, f"not called: the process {ended} in {during}"))
    return tuple(out)
