"""The command line stays fast: it imports nothing heavy until a command needs it, and `fuseci
check` (a CPU job of CI, and an editor's hook) never does."""

import json
import subprocess
import sys

import pytest
from helpers import ROOT

HELP_HEAVY = ("pandas", "numpy", "cupy", "matplotlib", "jinja2", "junit_xml", "ncu_report", "rich.live")
CHECK_HEAVY = ("pandas", "numpy", "cupy", "torch", "matplotlib", "jinja2", "ncu_report", "rich.live")


def _imported(args: list[str], heavy: tuple[str, ...]) -> tuple[list[str], str]:
    """Which of ``heavy`` ``fuseci ARGS`` imports, run in a fresh interpreter; and what it said."""
    probe = f"""
import json, sys
from fuseci.cli import app
try:
    app({args!r})
except SystemExit as exc:
    print("exit", exc.code)
print(json.dumps([m for m in {heavy!r} if m in sys.modules]))
"""
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    *said, imported = done.stdout.strip().splitlines()
    return json.loads(imported), "\n".join(said)


def test_help_imports_nothing_heavy() -> None:
    assert _imported(["--help"], HELP_HEAVY)[0] == []


@pytest.mark.parametrize("suites", [sorted(str(p.relative_to(ROOT)) for p in (ROOT / "suites").glob("*.yaml"))])
def test_check_imports_nothing_heavy(suites: list[str]) -> None:
    imported, said = _imported(["check", *suites], CHECK_HEAVY)
    assert said.endswith("all valid\nexit 0"), said  # it checked every suite, and found them valid
    assert imported == []


def test_every_name_of_the_lazy_api_resolves() -> None:
    from fuseci import api

    assert sorted(api.__all__) == sorted(api._HOME)  # one list of names, one map to their modules
    assert all(getattr(api, name) is not None for name in api.__all__)  # each found where the map says
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        api.nothing  # noqa: B018


#: Every command's usage line: required arguments plain (typer writes them in braces), optional
#: ones in brackets, as each command's Arguments section and the docs name them.
USAGE = {
    "ab": "ab [OPTIONS] BASE [HEAD]",
    "bench": "bench [OPTIONS] [SUITE]...",
    "check": "check [OPTIONS] [SUITE]...",
    "compare": "compare [OPTIONS] A B [SUITE]...",
    "doctor": "doctor [OPTIONS]",
    "history": "history [OPTIONS] RESULTS_DIR [SUITE]...",
    "init": "init [OPTIONS] FUNCTION...",
    "ledger": "ledger [OPTIONS] COMMAND [ARGS]...",
    "merge": "merge [OPTIONS] RESULTS...",
    "run": "run [OPTIONS] [SUITE]...",
    "update-baselines": "update-baselines [OPTIONS] [SUITE]...",
}


def test_every_usage_line_names_its_arguments_plainly() -> None:
    import typer.main
    from typer.testing import CliRunner

    from fuseci.cli import app

    commands = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    assert commands == sorted(USAGE), "a new command: add its usage line here"
    for name in commands:
        result = CliRunner().invoke(app, [name, "--help"], prog_name="fuseci", env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        usage = next(line for line in result.output.splitlines() if line.startswith("Usage:"))
        assert usage == f"Usage: fuseci {USAGE[name]}", usage
