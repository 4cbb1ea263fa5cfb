"""The ``fuseci`` command line: thin commands over :mod:`fuseci.api`.

:mod:`fuseci.cli.commands` holds the commands (:mod:`fuseci.cli.starting` init, :mod:`fuseci.cli.ledger_group` the ``ledger`` group: diff and show),
:mod:`fuseci.cli.options` their options, :mod:`fuseci.cli.measuring` what ``run`` and ``ab``
share once parsed, :mod:`fuseci.cli.error_boundary` the one error
boundary as typer's group and command classes (a :class:`~fuseci.errors.FuseciError` becomes one
line on stderr and its exit code; anything else is a bug, reported on one line with exit 3 and
its traceback under ``-v``), :mod:`fuseci.cli.output` the report files built from
:data:`fuseci.reporters.REPORTS` and the terminal (:mod:`fuseci.cli.terminal`, rich), and
:mod:`fuseci.cli.progress` what a run says as it goes.
"""

from __future__ import annotations

from fuseci.cli import ledger_group as _ledgers  # noqa: F401 (registers the ledger group)
from fuseci.cli import starting as _starting  # noqa: F401 (registers init)
from fuseci.cli.commands import app

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point."""
    app()
