"""`fuseci --help` stays fast: the command line imports nothing heavy until a command needs it."""

import subprocess
import sys

from conftest import ROOT

HEAVY = ("pandas", "numpy", "cupy", "matplotlib", "jinja2", "junit_xml", "ncu_report", "rich.live")

PROBE = f"""
import sys
from fuseci.cli import app
try:
    app(["--help"])
except SystemExit:
    pass
print([m for m in {HEAVY!r} if m in sys.modules])
"""


def test_help_imports_nothing_heavy() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
