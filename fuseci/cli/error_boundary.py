"""The one error boundary, as typer's group and command classes: a :class:`~fuseci.errors.FuseciError` is one
line on stderr and its exit code; anything else a bug, one line and exit 3; a signal that ends it, 128 + its number."""

from __future__ import annotations

import errno
import re
import sys
import traceback
from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

from fuseci.cli.output import close_streams, error, open_streams, stdout_is_gone
from fuseci.errors import EXIT_SETUP, Cancelled, FuseciError
from fuseci.measure.process import cancel_on_signals

#: The modules of the ``full`` extra's packages, which the light install leaves out.
FULL_MODULES = ("numpy", "pandas", "junit_xml", "ncu_report", "jinja2", "matplotlib")


def failed(exc: Exception, verbose: bool) -> int:
    """The exit code of a command that raised ``exc``, said on stderr (anything unforeseen a bug: exit 3)."""
    if isinstance(exc, FuseciError):
        error(str(exc))
        return exc.exit_code
    missing = (exc.name or "").split(".")[0] if isinstance(exc, ModuleNotFoundError) else ""
    if missing in FULL_MODULES:
        error(
            f"this command needs {missing}, which the light install of fuseci leaves out: "
            "pip install 'fuseci[full]' (or a GPU extra: cuda12, cuda13, torch)"
        )
        return EXIT_SETUP
    if verbose:
        traceback.print_exception(type(exc), exc, exc.__traceback__)
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    error(
        f"internal error: {type(exc).__name__}: {first[:300]} (a bug in fuseci; "
        f"{'the traceback is above' if verbose else 'run again with -v for its traceback'})"
    )
    return EXIT_SETUP


def short_help(help_text: str | None) -> str:
    """A command's line in ``fuseci --help``: its help's first clause, whole (click would cut it)."""
    first = " ".join((help_text or "").split("\n\n")[0].split())
    return re.split(r"(?<=[.:;])\s", first, maxsplit=1)[0].rstrip(".:;")


class Command(TyperCommand):
    """A fuseci command: its body returns its exit code, inside the boundary; its help names each
    argument by its metavar, and its usage line a required one plainly (``BASE``, not ``{BASE}``)."""

    def get_short_help_str(self, limit: int = 45) -> str:
        """The help's first clause, whole (:func:`short_help`)."""
        return self.short_help or short_help(self.help)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument) and param.required:
                pieces.append(param.display_name_raw + ("..." if param.nargs != 1 else ""))
            else:
                pieces += param.get_usage_pieces(ctx)
        return pieces

    def invoke(self, ctx: Any) -> Any:
        try:
            with cancel_on_signals():  # children run in sessions of their own: stop them ourselves
                code = super().invoke(ctx)
        except Cancelled as exc:
            error(f"cancelled ({exc.name}): what it had started was stopped")
            code = exc.exit_code
        except Exception as exc:  # a FuseciError is one line; anything else a bug, never exit 1
            code = failed(exc, verbose=bool(ctx.params.get("verbose")))
        raise typer.Exit(code)

    def format_options(self, ctx: Any, formatter: Any) -> None:
        arguments, options = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if isinstance(param, TyperArgument):
                arguments.append((param.metavar or record[0], record[1]))
            else:
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


class Group(TyperGroup):
    """The command group, with the boundary around everything that is not a command's body; a closed
    stdout (``fuseci run | head``) is exit 3 as well, where click would exit 1."""

    def get_short_help_str(self, limit: int = 45) -> str:
        """The help's first clause, whole (:func:`short_help`): a group listed as a command."""
        return self.short_help or short_help(self.help)

    def invoke(self, ctx: Any) -> Any:
        """Run the command; a broken stdout pipe is exit 3."""
        try:
            return super().invoke(ctx)
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise
            stdout_is_gone()
            raise typer.Exit(EXIT_SETUP) from None

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """click's ``main``, inside the boundary, with stdout and stderr made writable first and flushed last."""
        argv = kwargs.get("args", args[0] if args else None)
        argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
        open_streams()
        try:
            result = super().main(*args, **kwargs)
        except SystemExit as exc:  # click's way to end in standalone mode
            if not isinstance(exc.code, int | None):
                raise
            sys.exit(close_streams(exc.code or 0))
        except Exception as exc:
            code = failed(exc, verbose="-v" in argv or "--verbose" in argv)
        else:
            return close_streams(result) if isinstance(result, int) else result
        code = close_streams(code)
        if not kwargs.get("standalone_mode", True):
            return code
        sys.exit(code)
