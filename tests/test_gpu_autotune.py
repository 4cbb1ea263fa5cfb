"""The baseline's autotuning choices on a real GPU (fuseci/measure/autotune.py): a baseline
recorded with one cold compile cache keeps the ``.best_config`` entries its kernels used, and a
run with another cold cache puts them in place before compiling and runs those configurations,
so Inductor does not tune again and write another choice. gpu-marked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fuseci.cli import app
from fuseci.measure import autotune

pytestmark = pytest.mark.gpu

#: Two cases of suites/pytorch.yaml whose compiled kernels Inductor autotunes at their first
#: launch: the softmax's reduction (whose choice two cold caches on an H100 once made differently,
#: docs/SUITES.md) and the bias + GELU + residual's pointwise kernel.
SUITE = """\
suite: autotuned
defaults:
  framework: torch
  dtype: bfloat16
cases:
  - id: softmax
    inputs:
      x: {shape: [32768, 4096]}
    params: {scale: 1.0}
    reference: kernels.pytorch:softmax_reference
    correctness: {rtol: 1.6e-2, atol: 1.0e-6}
    variants:
      unfused: kernels.pytorch:softmax_eager
      compiled: kernels.pytorch:softmax_compiled
  - id: bias_gelu_residual
    inputs:
      x: {shape: [16384, 8192]}
      bias: {shape: [8192]}
      residual: {shape: [16384, 8192]}
    reference: kernels.pytorch:bias_gelu_residual_reference
    variants:
      unfused: kernels.pytorch:bias_gelu_residual_eager
      compiled: kernels.pytorch:bias_gelu_residual_compiled
"""


def test_a_cold_cache_runs_the_baseline_s_choices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        monkeypatch.delenv(var, raising=False)  # each run's own cache, under its report directory
    suite = tmp_path / "autotuned.yaml"
    suite.write_text(SUITE)
    baselines = tmp_path / "baselines"
    runner = CliRunner()
    first = runner.invoke(
        app, ["update-baselines", str(suite), "--baselines", str(baselines), "--report-dir", str(tmp_path / "a")]
    )
    assert first.exit_code == 0, first.output
    (kept_file,) = baselines.glob("*/autotuned.autotune.json")
    entries = autotune.load(kept_file)
    assert entries, "no autotuning entry kept: did Inductor autotune the compiled kernel?"
    second = runner.invoke(
        app, ["run", str(suite), "--baselines", str(baselines), "--report-dir", str(tmp_path / "b"), "-v"]
    )
    assert second.exit_code == 0, second.output
    assert "autotuning choice(s) kept with the baseline in place in the compile cache" in second.output
    cache = tmp_path / "b" / "compile-cache" / "inductor"
    for key, entry in entries.items():
        assert json.loads((cache / key).read_text()) == entry, key  # not tuned again, not replaced
    record = json.loads((tmp_path / "b" / "autotuned.harness.json").read_text())
    assert record["autotune"] == entries
