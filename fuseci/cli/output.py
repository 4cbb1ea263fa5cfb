"""What every command shares on its way out: plain lines, the terminal (:class:`Terminal`), the
report files built from the reporter registry, GitHub's step summary and annotations."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import stat
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import typer

from fuseci.errors import EXIT_REGRESSION, EXIT_SETUP, FuseciError, OutputError

if TYPE_CHECKING:
    from fuseci.cli.terminal import Stream
    from fuseci.judge.verdict import Comparison

log = logging.getLogger("fuseci")


class _OneLine(logging.Formatter):
    """Log messages on one line each (they may hold text from files); a traceback keeps its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        from fuseci.reporters.text import clean

        return clean(super().formatMessage(record))


def setup_logging(verbose: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine("fuseci: %(message)s"))
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])


def echo(text: str, err: bool = False, nl: bool = True) -> None:
    """Print ``text`` as it is on stdout, or stderr with ``err``; a stream that cannot take it is noted, never raised."""
    try:
        typer.echo(text, err=err, nl=nl)
    except (OSError, ValueError) as exc:  # a closed pipe, a full disk, a closed file
        lost(stderr=err, why=exc)


def say(message: str, err: bool = False) -> None:
    """Print one line that may hold text from files (kernel names, messages, paths), made safe."""
    from fuseci.reporters.text import clean

    echo(clean(message), err=err)


def error(message: str) -> None:
    say(f"fuseci: error: {message}", err=True)


class _Streams:
    """Whether what this command printed on stdout was lost (:func:`lost`), and why."""

    stdout_lost = False
    why = ""


def _to_devnull(fd: int) -> None:
    """Point descriptor ``fd`` at /dev/null (a closed one is opened there)."""
    devnull = os.open(os.devnull, os.O_RDWR)
    if devnull != fd:
        os.dup2(devnull, fd)
        os.close(devnull)


def _gone(stream: TextIO | None, fd: int) -> None:
    """Point a stream that cannot be written at /dev/null, so that no later write fails again (exit 120)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):  # no real descriptor behind it (a test runner's)
        if stream is not None and stream.fileno() == fd:
            _to_devnull(fd)


def stdout_is_gone() -> None:
    """Point a closed pipe's stdout at /dev/null, so that the flush at exit cannot fail again."""
    _gone(sys.stdout, 1)


def lost(*, stderr: bool, why: BaseException | str = "") -> None:
    """A write to stdout (or stderr) failed: it is pointed at /dev/null from now on; a lost stdout
    makes a pass exit 3 (:func:`close_streams`)."""
    if stderr:
        _gone(sys.stderr, 2)
        return
    if not _Streams.stdout_lost:
        _Streams.stdout_lost = True
        _Streams.why = (getattr(why, "strerror", None) or str(why)) if why else "closed"
    stdout_is_gone()


def open_streams() -> None:
    """Make stdout and stderr writable, whatever the caller left: a closed descriptor 0, 1 or 2 opened on /dev/null
    (a closed stdout is lost already), a missing stream made, characters the encoding lacks backslash-escaped."""
    _Streams.stdout_lost, _Streams.why = False, ""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                _to_devnull(fd)
            except OSError:  # no /dev/null: nothing better to do
                continue
            if fd == 1:
                _Streams.stdout_lost, _Streams.why = True, "closed"
    if sys.stdout is None:
        sys.stdout = open(1, "w", errors="backslashreplace", closefd=False)  # noqa: SIM115 (the process's)
    if sys.stderr is None:
        sys.stderr = open(2, "w", errors="backslashreplace", closefd=False)  # noqa: SIM115 (the process's)
    for stream in (sys.stdout, sys.stderr):
        # AttributeError: not a text file Python made (a test runner's)
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]


def close_streams(code: int) -> int:
    """Flush stdout and stderr at a command's end; the exit code: ``code``, but 3 for a pass whose stdout was lost."""
    for stream, err in ((sys.stdout, False), (sys.stderr, True)):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError) as exc:
            lost(stderr=err, why=exc)
    if not _Streams.stdout_lost:
        return code
    final = EXIT_SETUP if code == 0 else code
    error(f"stdout: cannot write what fuseci prints there ({_Streams.why}); exit {final}")
    return final


class Terminal:
    """Where a command prints through rich (the context's ``obj``); its streams, and rich, come when first used."""

    @functools.cached_property
    def out(self) -> Stream:
        from fuseci.cli.terminal import Stream

        return Stream()

    @functools.cached_property
    def err(self) -> Stream:
        from fuseci.cli.terminal import Stream

        return Stream(stderr=True)


def _option(name: str) -> str:
    from fuseci.reporters import FILE_FORMATS

    return next((f.option for f in FILE_FORMATS if f.name == name), f"--{name}")


#: What names the step summary in messages.
SUMMARY = "$GITHUB_STEP_SUMMARY"


def step_summary() -> Path | None:
    """GitHub's step summary file, when the command runs in a step that has one."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    return Path(summary) if summary else None


def kept_files(
    *, root: Path = Path("."), baselines: Iterable[Path] = (), results_dirs: Iterable[Path | None] = ()
) -> list[tuple[Path, str]]:
    """The files fuseci keeps around a command, read this time or not: the suite files and
    baselines under ``root`` and each baseline root given, and the run files of each results directory."""
    from fuseci.store import baselines as stored
    from fuseci.store import runs

    found = [(p, "a suite file") for pattern in ("*.yaml", "*.yml") for p in sorted((root / "suites").glob(pattern))]
    for root_of_baselines in dict.fromkeys([root / "baselines", *baselines]):
        found += [(p, "a baseline") for p in stored.kept_in(root_of_baselines)]
    for results in results_dirs:
        if results is not None and results.is_dir():
            found += [(p, "a run file of the results directory") for p in runs.kept_in(results)]
    return found


def check_outputs(
    outputs: Mapping[str, Path], inputs: Iterable[tuple[Path | str, str]], *, summary: bool = True
) -> None:
    """Refuse report files that would replace one of the command's ``inputs``, a file fuseci keeps
    (:func:`kept_files`), or each other; before any measuring. With ``summary``, the step summary too.

    Raises:
        UsageError: two outputs name one file.
        OutputError: an output names an input (compared as files).
    """
    from fuseci.files.outputs import Output
    from fuseci.files.outputs import check_outputs as check

    named = [Output(path, _option(name)) for name, path in outputs.items()]
    github = step_summary() if summary else None
    if github is not None:
        named.append(Output(github, SUMMARY))
    if named:
        check(named, [*inputs, *kept_files()])  # the command's own names first: the messages say what each is to it


def _judged_files(comparisons: list[Comparison]) -> list[tuple[str, str]]:
    """The baseline and suite files the comparisons were judged from."""
    found: list[tuple[str, str]] = []
    for c in comparisons:
        if c.baseline_path:
            found.append((c.baseline_path, f"the baseline suite {c.suite!r} was judged against"))
        if c.suite_path:
            found.append((c.suite_path, f"the suite file of {c.suite!r}"))
    return found


def report(
    terminal: Terminal,
    comparisons: list[Comparison],
    outputs: dict[str, Path],
    code: int,
    *,
    tables_shown: bool = False,
    console: bool = True,
    verbose: bool = False,
    keep: Callable[[int], int] | None = None,
) -> int:
    """The files asked for, GitHub's step summary and annotations, ``keep`` (exit code so far in, the next out),
    then the console report (its totals line alone when ``tables_shown``), whose last line says the exit code:
    ``code``, or 3 (not over a 1) when a file could not be written or stdout was lost."""
    # Each reporter is imported where it is used: `fuseci check` prints no console report.
    from fuseci.reporters.text import totals

    failures = _write_reports(comparisons, outputs)
    for message in failures:
        error(message)
    if failures:
        code = code if code == EXIT_REGRESSION else EXIT_SETUP
    if keep is not None:
        code = keep(code)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from fuseci.reporters import github as github_reporter

        # An output not written is its own error annotation, first, with the verdict: a missing summary hides nothing.
        verdict = totals(comparisons, code)
        annotations = github_reporter.render(comparisons, failures=[f"{m}; {verdict}" for m in failures])
        if not terminal.out.show(annotations):
            code = code if code == EXIT_REGRESSION else EXIT_SETUP
    if tables_shown or console:
        from fuseci.reporters import console as console_reporter

        if tables_shown:
            shown = terminal.out.show(totals(comparisons, code) + "\n")
        else:
            shown = terminal.out.show_lines(console_reporter.report(comparisons, verbose=verbose, code=code))
        if not shown or terminal.out.lost:  # lost now, or while a suite's table was printed
            code = code if code == EXIT_REGRESSION else EXIT_SETUP
    return code


def write_file(path: Path | str, text: str, code: int, what: str = "json report") -> int:
    """Write a command's own report file; the exit code: ``code``, or 3 (not over a 1) when it cannot be written."""
    from fuseci.files.outputs import write_output

    try:
        write_output(Path(path), text)
    except OSError as exc:
        error(f"{path}: cannot write the {what}: {exc.strerror or exc}")
        return code if code == EXIT_REGRESSION else EXIT_SETUP
    return code


def _write_reports(comparisons: list[Comparison], outputs: Mapping[str, Path]) -> list[str]:
    """Write the files asked for and append the step summary; what could not be written, one message each."""
    from fuseci.files.outputs import write_output
    from fuseci.reporters import FORMATS

    judged = _judged_files(comparisons)
    failures: list[str] = []
    for name, path in outputs.items():
        try:
            check_outputs({name: path}, judged, summary=False)
            write_output(path, FORMATS[name](comparisons))
        except OutputError as exc:  # one of the inputs
            failures.append(str(exc))
        except OSError as exc:
            failures.append(f"{path}: cannot write the {name} report: {exc.strerror or exc}")
        except FuseciError as exc:  # a document fuseci could not read back
            failures.append(f"{path}: cannot write the {name} report: {exc}")
    summary = step_summary()
    if summary is not None:
        from fuseci.reporters import markdown as markdown_reporter

        try:
            check_outputs({}, judged)
            _append_summary(summary, comparisons, markdown_reporter.STEP_SUMMARY_LIMIT, markdown_reporter.render)
        except OutputError as exc:
            failures.append(str(exc))
        except OSError as exc:
            failures.append(f"{summary}: cannot append the step summary ({SUMMARY}): {exc.strerror or exc}")
    return failures


def _append_summary(path: Path, comparisons: list[Comparison], limit: int, render: Callable[..., str]) -> None:
    """Append to the step summary within what is left of GitHub's limit (OSError when it cannot)."""
    from fuseci.files.outputs import append_output

    try:
        st = path.stat()
        used = st.st_size if stat.S_ISREG(st.st_mode) else 0
    except FileNotFoundError:
        used = 0
    room = limit - used
    if room <= 0:
        log.warning("%s: the step summary holds %d bytes already, GitHub's limit: nothing appended", path, used)
        return
    append_output(path, render(comparisons, limit=room))
