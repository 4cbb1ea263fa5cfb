"""The ``fuseci`` command line: thin commands over :mod:`fuseci.api`."""

from __future__ import annotations

from fuseci.cli import ledger_group as _ledgers  # noqa: F401 (registers the ledger group)
from fuseci.cli import starting as _starting  # noqa: F401 (registers init)
from fuseci.cli.commands import app

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point."""
    app()
