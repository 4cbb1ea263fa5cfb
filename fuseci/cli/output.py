"""What every command shares on its way out: the one error boundary, the report files built from
the reporter registry, GitHub's step summary and annotations, and what a run says as it goes."""

from __future__ import annotations

import errno
import functools
import inspect
import logging
import os
import stat
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from fuseci.errors import EXIT_REGRESSION, EXIT_SETUP, FuseciError, OutputError

if TYPE_CHECKING:
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


def colour(stream: Any = None) -> bool:
    """Whether to colour what goes to ``stream`` (default stdout): never with ``NO_COLOR`` set
    (no-color.org) or ``TERM=dumb``; always with ``FORCE_COLOR``; else on a terminal, and in a
    GitHub Actions log (which shows colour)."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    if os.environ.get("GITHUB_ACTIONS") == "true":
        return True
    isatty = getattr(stream if stream is not None else sys.stdout, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def console_style(verbose: bool = False) -> dict[str, bool]:
    """How the console report is drawn: colour (:func:`colour`), and every note with ``-v``."""
    return {"color": colour(), "verbose": verbose}


def say(message: str, err: bool = False) -> None:
    """Print one line that may hold text from files (kernel names, messages, paths), made safe."""
    from fuseci.reporters.text import clean

    typer.echo(clean(message), err=err)


def error(message: str) -> None:
    say(f"fuseci: error: {message}", err=True)


def internal_error(exc: BaseException, verbose: bool) -> int:
    """Report a bug: one line (the exception's first line), its traceback before it only when
    ``verbose``; never the regression code.

    Returns:
        The exit code, 3.
    """
    if verbose:
        traceback.print_exception(type(exc), exc, exc.__traceback__)
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    error(
        f"internal error: {type(exc).__name__}: {first[:300]} (a bug in fuseci; "
        f"{'the traceback is above' if verbose else 'run again with -v for its traceback'})"
    )
    return EXIT_SETUP


def boundary(fn: Callable[..., int]) -> Callable[..., None]:
    """The error boundary of a command whose body returns its exit code: a
    :class:`~fuseci.errors.FuseciError` is one line and its exit code, anything else a bug
    (:func:`internal_error`; its traceback with the command's own ``-v``)."""

    @functools.wraps(fn)
    def command(*args: Any, **kwargs: Any) -> None:
        try:
            code = fn(*args, **kwargs)
        except FuseciError as exc:
            error(str(exc))
            code = exc.exit_code
        except Exception as exc:  # a bug: one line, never the regression code; -v shows where
            code = internal_error(exc, verbose=bool(kwargs.get("verbose")))
        raise typer.Exit(code)

    return command


def _stdout_is_gone() -> None:
    """Point a closed pipe's stdout at /dev/null, so that the flush at exit cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real descriptor behind stdout (a test runner's)
        pass


def _no_type(ctx: Any = None) -> None:
    return None


class GuardedGroup(TyperGroup):
    """The command group, with the boundary around everything that is not a command's body:
    option callbacks, argument conversion, the command-line machinery. A FuseciError there is one
    line and its exit code; any other exception is a bug (:func:`internal_error`, traceback with
    ``-v``/``--verbose`` on the command line), exit 3, never the 1 of a regression. A closed
    stdout (``fuseci run | head``) is exit 3 as well, where click would exit 1.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for command in self.commands.values():  # help shows an argument's name, not its Python type
            for param in command.params:
                if param.param_type_name == "argument" and hasattr(param, "display_type_rich"):
                    setattr(param, "display_type_rich", _no_type)  # noqa: B010 (typer's own method, per instance)

    def invoke(self, ctx: Any) -> Any:
        """Run the command; a broken stdout pipe is exit 3."""
        try:
            return super().invoke(ctx)
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise
            _stdout_is_gone()
            raise typer.Exit(EXIT_SETUP) from None

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """click's ``main``, inside the boundary."""
        argv = kwargs.get("args", args[0] if args else None)
        argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
        try:
            return super().main(*args, **kwargs)
        except FuseciError as exc:
            error(str(exc))
            code = exc.exit_code
        except Exception as exc:
            code = internal_error(exc, verbose="-v" in argv or "--verbose" in argv)
        if not kwargs.get("standalone_mode", True):
            return code
        sys.exit(code)


def with_report_options(fn: Callable[..., int]) -> Callable[..., int]:
    """Give a command one ``--FORMAT PATH`` option per file format of the reporter registry,
    gathered into its ``outputs`` argument (format name → path)."""
    from fuseci.reporters import FILE_FORMATS

    sig = inspect.signature(fn, eval_str=True)
    own = [p for p in sig.parameters.values() if p.name != "outputs"]
    extra = [
        inspect.Parameter(
            f"{f.name}_out",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=Annotated[Path | None, typer.Option(f.option, help=f.help, dir_okay=False, metavar="PATH")],
            default=None,
        )
        for f in FILE_FORMATS
    ]

    @functools.wraps(fn)
    def command(*args: Any, **kwargs: Any) -> int:
        outputs = {f.name: kwargs.pop(f"{f.name}_out") for f in FILE_FORMATS}
        return fn(*args, outputs={k: v for k, v in outputs.items() if v is not None}, **kwargs)

    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own] + extra
    command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    del command.__wrapped__  # typer must see the new signature, not the wrapped one
    return command


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
        ``code``, or 3 when a file could not be written (a regression's 1 stays 1).
    """
    from fuseci.reporters import FORMATS
    from fuseci.reporters import github as github_reporter
    from fuseci.reporters import markdown as markdown_reporter
    from fuseci.reporters.text import totals
    from fuseci.store.atomic import write_output

    if tables_shown:
        shown = echo(totals(comparisons) + "\n")
    else:
        shown = not console or echo(FORMATS["console"](comparisons, **console_style(verbose)))
    if not shown or _LOST:  # a table printed as its suite was judged may have gone nowhere as well
        code = code if code == EXIT_REGRESSION else EXIT_SETUP
    _LOST.clear()
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
        # An output that could not be written is an error annotation of its own, first, with the
        # verdict in it: a step summary that is missing must not hide what was found.
        verdict = totals(comparisons, code)
        annotations = github_reporter.render(comparisons, failures=[f"{m}; {verdict}" for m in failures])
        if not echo(annotations):
            code = code if code == EXIT_REGRESSION else EXIT_SETUP
    return code


#: Set once stdout was found closed: what was printed after went nowhere (:func:`report`).
_LOST: list[bool] = []


def echo(text: str, err: bool = False) -> bool:
    """Print to stdout; False when no one reads it any more (a closed pipe: ``fuseci run | head``),
    so that the files asked for are still written and the exit code still says what was found."""
    try:
        typer.echo(text, nl=False, err=err, color=True)  # colour is decided by colour(), not by click
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        if not err:
            _stdout_is_gone()
            _LOST.append(True)
        return False
    return True


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
