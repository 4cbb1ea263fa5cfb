"""The ``fuseci`` command line: thin commands over :mod:`fuseci.api`.

:mod:`fuseci.cli.commands` holds the commands (:mod:`fuseci.cli.machine` bench and doctor), :mod:`fuseci.cli.options` the options they
share, and :mod:`fuseci.cli.output` the one error boundary (a
:class:`~fuseci.errors.FuseciError` becomes one line on stderr and its exit code; anything else
is a bug, reported on one line with exit 3 and its traceback under ``-v``) and the report files
built from :data:`fuseci.reporters.REPORTS`.
"""

from __future__ import annotations

from fuseci.cli import machine as _machine  # noqa: F401 (registers bench and doctor)
from fuseci.cli.commands import app

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point."""
    app()
