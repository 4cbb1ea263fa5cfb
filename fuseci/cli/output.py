"""What every command shares on its way out: plain lines, the terminal (:class:`Terminal`), the
report files built from the reporter registry, GitHub's step summary and annotations."""

from __future__ import annotations

import functools
import logging
import os
import stat
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from fuseci.errors import EXIT_REGRESSION, EXIT_SETUP, OutputError

if TYPE_CHECKING:
    from fuseci.cli.terminal import Stream
    from fuseci.judge.verdict import Comparison

log = logging.getLogger("fuseci")


class _OneLine(logging.Formatter):
    """Log messages on one line each (paths and messages come from files: see ``clean``); a
    traceback under ``-v`` keeps its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        from fuseci.reporters.text import clean

        return clean(super().formatMessage(record))


def setup_logging(verbose: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine("fuseci: %(message)s"))
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])


def say(message: str, err: bool = False) -> None:
    """Print one line that may hold text from files (kernel names, messages, paths), made safe."""
    from fuseci.reporters.text import clean

    typer.echo(clean(message), err=err)


def error(message: str) -> None:
    say(f"fuseci: error: {message}", err=True)


def stdout_is_gone() -> None:
    """Point a closed pipe's stdout at /dev/null, so that the flush at exit cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real descriptor behind stdout (a test runner's)
        pass


class Terminal:
    """Where one command prints its report and progress: the context's ``obj``, made by the app's
    callback. Plain lines (errors, ``fuseci check``'s) go through typer; a report and progress
    through rich, whose streams are made when first used, so that a command without them does
    not import rich's console."""

    @functools.cached_property
    def out(self) -> Stream:
        """stdout."""
        from fuseci.cli.terminal import Stream

        return Stream()

    @functools.cached_property
    def err(self) -> Stream:
        """stderr."""
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


def check_outputs(
    outputs: Mapping[str, Path], inputs: Iterable[tuple[Path | str, str]], *, summary: bool = True
) -> None:
    """Refuse report files that would replace one of the command's inputs, or each other
    (:func:`fuseci.store.atomic.check_outputs`); call it before any measuring, so that nothing
    is spent on a run whose reports would be refused.

    Args:
        outputs: Format name → path, as the ``--FORMAT PATH`` options gave them.
        inputs: Every file the command reads (or writes for itself), with what it is for messages.
        summary: Whether the command appends to the step summary (:func:`step_summary`), which is
            then an output like the others.

    Raises:
        UsageError: two outputs name one file.
        OutputError: an output names an input (compared as files: links, hard links and ``..``
            are seen through).
    """
    from fuseci.store.atomic import Output
    from fuseci.store.atomic import check_outputs as check

    named = [Output(path, _option(name)) for name, path in outputs.items()]
    github = step_summary() if summary else None
    if github is not None:
        named.append(Output(github, SUMMARY))
    check(named, inputs)


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
) -> int:
    """The console report (only its totals line when ``tables_shown``: each suite's table was
    printed as it was judged), the files asked for, and GitHub's step summary and annotations.

    A file asked for that is a baseline or suite file of the comparisons is refused, as one that
    cannot be written (commands refuse their other inputs before measuring: :func:`check_outputs`).

    Returns:
        ``code``, or 3 when a file could not be written or stdout was closed before the report
        was printed (a regression's 1 stays 1).
    """
    # Each reporter is imported where it is used: `fuseci check` prints no console report.
    from fuseci.reporters import FORMATS
    from fuseci.reporters.text import totals
    from fuseci.store.atomic import write_output

    if tables_shown or console:
        from fuseci.reporters import console as console_reporter

        if tables_shown:
            shown = terminal.out.show(totals(comparisons) + "\n")
        else:
            shown = terminal.out.show_lines(console_reporter.report(comparisons, verbose=verbose))
        if not shown:  # lost now, or while a suite's table was printed
            code = code if code == EXIT_REGRESSION else EXIT_SETUP
    judged = _judged_files(comparisons)
    failures: list[str] = []  # outputs that could not be written, for the annotations
    for name, path in outputs.items():
        try:
            check_outputs({name: path}, judged, summary=False)
            write_output(path, FORMATS[name](comparisons))
        except OutputError as exc:
            failures.append(str(exc))
        except OSError as exc:
            failures.append(f"{path}: cannot write the {name} report: {exc.strerror or exc}")
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
    for message in failures:
        error(message)
    if failures:
        code = code if code == EXIT_REGRESSION else EXIT_SETUP
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from fuseci.reporters import github as github_reporter

        # An output that could not be written is an error annotation of its own, first, with the
        # verdict in it: a step summary that is missing must not hide what was found.
        verdict = totals(comparisons, code)
        annotations = github_reporter.render(comparisons, failures=[f"{m}; {verdict}" for m in failures])
        if not terminal.out.show(annotations):
            code = code if code == EXIT_REGRESSION else EXIT_SETUP
    return code


def _append_summary(path: Path, comparisons: list[Comparison], limit: int, render: Callable[..., str]) -> None:
    """Append to the step summary (GitHub takes up to 1 MiB per step: stay within what is left).

    Raises:
        OSError: it cannot be written (a full disk, ``/dev/full``, a FIFO no process reads, a
            directory): the caller makes that an error, never a warning.
    """
    from fuseci.store.atomic import append_output

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
