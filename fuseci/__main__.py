"""``python -m fuseci``."""

from fuseci.cli import main

main()
