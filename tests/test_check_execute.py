"""``fuseci check --execute``: every function called once on the CPU, and the light install that
``init`` and ``check`` need.

The calls need PyTorch (a CPU build does); Triton kernels need Triton, run by its interpreter.
Tests that call need them and skip where they are absent. The inputs' scaling, the refusal to
call a suite with problems and the light install need neither.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import ROOT
from typer.testing import CliRunner

from fuseci.api.execute import execute, exit_code
from fuseci.cli import app
from fuseci.cli.error_boundary import FULL_MODULES
from fuseci.config.model import Case, InputSpec
from fuseci.config.parse import load_suite
from fuseci.harness.trial import scale, small_inputs
from fuseci.records.trials import Outcome

DATA = ROOT / "tests" / "data" / "suites"
HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_TRITON = importlib.util.find_spec("triton") is not None and importlib.util.find_spec("numpy") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed (a CPU build does)")


def _case(shapes: dict[str, tuple[int, ...]], params: dict[str, object] | None = None) -> Case:
    inputs = tuple(InputSpec(name, shape, "float32", "normal", 1) for name, shape in shapes.items())
    return Case("c", "", inputs, params or {}, (), None, None, {}, 1)


def test_long_axes_are_divided_by_one_power_of_two_keeping_rank_and_ratios() -> None:
    small = small_inputs(_case({"x": (8192, 4096), "weight": (4096,), "heads": (8192, 16)}))
    assert [s.shape for s in small] == [(256, 128), (128,), (256, 16)]  # 16: a short axis, kept


def test_scaling_stops_at_an_axis_it_would_not_divide_exactly_or_leave_under_16() -> None:
    assert scale(_case({"x": (3000, 1000)})) == 8  # 1000 / 8 = 125; 1000 / 16 is not whole
    assert scale(_case({"x": (48, 1 << 20)})) == 2  # 48 / 2 = 24; 48 / 4 = 12 < 16
    assert scale(_case({"x": (1 << 12,)})) == 1  # already small
    assert scale(_case({"x": (4099,)})) == 1  # odd: kept


def test_an_axis_a_param_names_is_kept() -> None:
    small = small_inputs(_case({"x": (8192, 4096)}, {"n_cols": 4096}))
    assert small[0].shape == (16, 4096)  # 4096 kept; 8192 divided until x holds 2**16 elements


def test_execute_calls_nothing_in_a_suite_with_problems(tmp_path: Path) -> None:
    bad = tmp_path / "suites" / "bad.yaml"
    bad.parent.mkdir()
    bad.write_text("suite: bad\ncases: []\n")
    result = CliRunner().invoke(app, ["check", str(bad), "--execute"])
    assert result.exit_code == 3, result.output
    assert "--execute calls nothing until the problems above are fixed" in result.output


@needs_torch
@pytest.mark.skipif(not HAS_TRITON, reason="Triton (and the NumPy its interpreter needs) is not installed")
def test_each_call_is_one_line_matched_wrong_raised_or_not_run_here() -> None:
    result = CliRunner().invoke(app, ["check", str(DATA / "execute.yaml"), "--execute"])
    assert result.exit_code == 1, result.output
    out = " ".join(result.output.split())
    assert (
        "execute.yaml:11: case 'rms'.variants.unfused (execute_kernels:rms_unfused): ran: matched the reference" in out
    )
    assert "execute.yaml:12: case 'rms'.variants.triton (execute_kernels:rms_triton): ran: matched the reference" in out
    assert (
        "execute.yaml:13: case 'rms'.variants.wrong (execute_kernels:rms_off): wrong result: wrong output 0 vs the reference"
        in out
    )
    raised = r"rows_of_7\): raised: RuntimeError: shape '\[-1, 7\]' is invalid for input of size 32768 at \S*execute_kernels\.py:\d+ "
    assert re.search(raised, out), out
    assert "on x [256, 128] float32, weight [128] float32" in out  # the shapes it ran on
    assert "on_cuda): could not run here: it needs a GPU (AssertionError: Torch not compiled with CUDA" in out
    assert "cupy (execute_cupy:rms_cupy): could not run here: it takes CuPy arrays, which need a GPU" in out
    assert "suite execute: executed on the CPU: 3 matched, 1 wrong, 1 raised, 2 not run here" in out


@needs_torch
def test_a_crash_is_put_on_its_call_and_what_it_kept_from_running_is_said() -> None:
    done = execute(load_suite(DATA / "execute-faults.yaml"))
    by = {t.function: t for t in done.trials}
    assert by["unfused"].outcome is Outcome.MATCHED and "unfused in float64" in by["unfused"].message
    assert by["crash"].outcome is Outcome.RAISED and "killed by SIGSEGV in this call" in by["crash"].message
    assert by["after"].outcome is Outcome.NOT_RUN and "in case 'crash''s crash" in by["after"].message
    assert exit_code([done]) == 1


@needs_torch
def test_a_hang_is_stopped_at_the_time_limit_and_named() -> None:
    done = execute(load_suite(DATA / "execute-hang.yaml"), timeout_s=25)
    by = {t.function: t for t in done.trials}
    assert by["unfused"].outcome is Outcome.MATCHED
    assert by["hang"].outcome is Outcome.RAISED and "did not finish within 25 s" in by["hang"].message


#: A child Python in which the full extra's modules cannot be imported, as in a light install.
_BLOCKER = textwrap.dedent(
    """
    import sys
    from importlib.abc import MetaPathFinder

    class Blocker(MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {blocked!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
    sys.argv = ["fuseci", *sys.argv[1:]]
    from fuseci.cli import main
    main()
    """
).format(blocked=set(FULL_MODULES))


def _light(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", _BLOCKER, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_init_and_check_run_without_the_full_extra(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "ops.py").write_text(
        "def add(x, y):\n    return x + y\n\ndef add_fused(x, y):\n    return x + y\n"
    )
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    init = _light(["init", "pkg.ops:add", "pkg.ops:add_fused", "--action", "owner/fuseci@v0.1.0"], tmp_path)
    assert init.returncode == 0, init.stdout + init.stderr
    assert "fuseci check --execute" in init.stdout
    check = _light(["check"], tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "suite pkg: 1 case, 2 variants: ok" in check.stdout


def test_a_command_that_needs_the_full_extra_says_so_in_one_line(tmp_path: Path) -> None:
    report = ROOT / "tests" / "data" / "reports" / "elementwise.ncu-rep.xz"
    run = _light(["run", str(ROOT / "suites" / "elementwise.yaml"), "--from-report", str(report)], tmp_path)
    assert run.returncode == 3, run.stdout + run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "which the light install of fuseci leaves out: pip install 'fuseci[full]'" in lines[0]
