"""The exception hierarchy: one subclass per layer. Every error a user can cause or meet is a
:class:`FuseciError`, which the CLI prints on one line before exiting with its ``exit_code``;
anything else is a bug and keeps its traceback."""

from __future__ import annotations

#: Exit codes, documented in docs/SUITES.md (summed up in README.md) and ``fuseci --help``.
EXIT_PASS = 0
EXIT_REGRESSION = 1
EXIT_USAGE = 2
EXIT_SETUP = 3


class Cancelled(BaseException):
    """A signal that ends the job arrived (SIGTERM, SIGHUP): unwind, stopping what fuseci started,
    and exit as the signal would. A ``BaseException``: nothing that handles errors may swallow it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        """The signal's number."""

    @property
    def name(self) -> str:
        """The signal's name (``SIGHUP``)."""
        import signal

        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"

    @property
    def exit_code(self) -> int:
        """The exit status a shell gives a process the signal ended."""
        return 128 + self.signum


class FuseciError(Exception):
    """Base class: a failure with a message that says what, where and how to fix it."""

    exit_code: int = EXIT_SETUP

    def __init__(self, *args: object, exit_code: int | None = None) -> None:
        """``exit_code`` overrides the class's (a failure to write after a wrong result is still exit 1)."""
        super().__init__(*args)
        if exit_code is not None:
            self.exit_code = exit_code


class SuiteError(FuseciError):
    """A suite file is missing, malformed or names things that do not exist."""

    def __init__(self, message: str, *, path: object = None, line: int = 0) -> None:
        super().__init__(message)
        self.path = path
        """The suite file, when known (for annotations that point at it)."""
        self.line = line
        """The line of the offending key (0 when unknown)."""


class HarnessError(FuseciError):
    """The harness could not build inputs or run a variant."""


class NcuError(FuseciError):
    """Nsight Compute is missing, refused to profile, or profiled nothing usable."""

    def __init__(self, message: str, *, machine_wide: bool = False) -> None:
        super().__init__(message)
        self.machine_wide = machine_wide
        """True when the cause is the machine's, not the suite's: every other suite would fail too."""


class BenchError(FuseciError):
    """The timed harness (``fuseci bench``) failed, timed out or left no usable record."""


class ReportError(FuseciError):
    """A ``.ncu-rep`` file (or its harness record) cannot be read or attributed."""

    def __init__(self, *args: object, exit_code: int | None = None, by_reader: bool = False) -> None:
        super().__init__(*args, exit_code=exit_code)
        self.by_reader = by_reader
        """True when NVIDIA's reader itself refused the file (a version mismatch may be why)."""


class MismatchError(ReportError):
    """A report and a harness record that are not one run's: the whole command stops, nothing judged or written."""


class BaselineError(FuseciError):
    """A baseline file is corrupt, from a newer fuseci, or cannot be written."""


class LedgerError(FuseciError):
    """Inductor's captured artifacts, ncu's kernel rows or a stored ledger cannot make a ledger."""


class OutputError(FuseciError):
    """A report file asked for would replace one of the command's inputs."""


class UsageError(FuseciError):
    """The command line asks for something contradictory."""

    exit_code = EXIT_USAGE
