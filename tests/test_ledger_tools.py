"""The ledger's GPU tools without a GPU: tools/ledger_depth.py writes suites fuseci loads, refuses
bad arguments with exit 3 and fits the cost of a profiled kernel; tools/ledger-aa.sh parses."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from fuseci.config.parse import load_suite

ROOT = Path(__file__).resolve().parent.parent


def _tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


depth = _tool("ledger_depth")


@pytest.mark.parametrize(("repeats", "per_block"), [("once", False), ("every", True)])
def test_the_suites_it_writes_load(tmp_path: Path, repeats: str, per_block: bool) -> None:
    fn = "stack_blocks_compiled" if per_block else "stack_compiled"
    path = tmp_path / "depth4.yaml"
    path.write_text(depth.SUITE.format(depth=4, name="depth4", fn=fn, how="x", repeats=repeats))
    suite = load_suite(path)
    (case,) = suite.cases
    compiled = next(v for v in case.variants if v.id == "compiled")
    assert case.params == {"depth": 4} and compiled.fn == f"kernels.models:{fn}"
    assert compiled.ledger is not None and compiled.ledger.repeats == repeats


@pytest.mark.parametrize("argv", [["--depths", "0"], ["--depths", "x"], ["--repeats", "sometimes"]])
def test_bad_arguments_are_exit_3_with_one_line(tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture) -> None:
    assert depth.main(["--out", str(tmp_path), *argv]) == 3
    err = capsys.readouterr().err
    assert err.startswith("ledger_depth: --") and len(err.strip().splitlines()) == 1


def test_the_cost_of_a_kernel_is_the_slope_within_each_depth() -> None:
    """A deeper model compiles and times more too: only `once` against `every` at one depth
    isolates what a profiled kernel costs (the H100's run of depths 1 and 8: 0.327 s, where a
    slope across the depths read 0.715 s)."""
    rows = [
        {"depth": 1, "profiled": 9, "seconds": 18.6},
        {"depth": 1, "profiled": 9, "seconds": 17.7},
        {"depth": 8, "profiled": 13, "seconds": 48.6},
        {"depth": 8, "profiled": 65, "seconds": 65.6},
        {"depth": 8, "seconds": 99.0},  # a run without a verdict
    ]
    assert depth._slope(rows) == pytest.approx(17.0 / 52)
    pooled = [{"depth": d, "profiled": p, "seconds": 10 * d + 0.25 * p} for d in (1, 4) for p in (9, 30)]
    assert depth._slope(pooled) == pytest.approx(0.25)
    assert (
        depth._slope([{"depth": 1, "profiled": 9, "seconds": 3.0}, {"depth": 8, "profiled": 13, "seconds": 9}]) is None
    )


def test_the_a_a_script_parses() -> None:
    assert subprocess.run(["bash", "-n", str(ROOT / "tools" / "ledger-aa.sh")], check=False).returncode == 0
