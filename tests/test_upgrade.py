"""An upgrade since the baseline (driver, CUDA runtime, CuPy, PyTorch, Triton, an ncu patch) is
compared across and named; another card, ncu release or measurement setting stays INCOMPARABLE."""

from dataclasses import replace
from pathlib import Path

import pytest
from helpers import CLEAN_REPORT, H200_BASELINES, REGRESSED_REPORT
from typer.testing import CliRunner

from fuseci.cli import app
from fuseci.judge.compare import compare
from fuseci.judge.verdict import CheckKind, Verdict, exit_code
from fuseci.measure import run as measure_run
from fuseci.measure.run import MeasureOptions
from fuseci.store import baselines as bl

BASELINE = bl.load_baseline(H200_BASELINES / "nvidia-h200" / "elementwise.json")
SUITE = "suites/elementwise.yaml"
UPGRADED = {"driver_version": "580.65.06", "cupy_version": "13.6.0", "torch_version": "2.11.0+cu130"}


@pytest.fixture(scope="module")
def clean(elementwise):
    return measure_run.measure(elementwise, MeasureOptions(from_report=CLEAN_REPORT))


@pytest.fixture(scope="module")
def regressed(elementwise):
    return measure_run.measure(elementwise, MeasureOptions(from_report=REGRESSED_REPORT))


def _upgraded(**env: object):
    return replace(BASELINE, env={**BASELINE.env, **UPGRADED, **env})


def _line(clean) -> str:
    torch_now = clean.env.get("torch_version")
    return (
        f"compared across an upgrade since the baseline: driver 580.65.06 -> {clean.env['driver_version']}, "
        f"CuPy 13.6.0 -> {clean.env['cupy_version']}, PyTorch 2.11.0+cu130 -> {'none' if torch_now is None else torch_now}"
    )


def test_an_upgrade_is_compared_and_passes_where_the_numbers_hold(clean, elementwise) -> None:
    comp = compare(clean, elementwise, _upgraded())
    assert comp.comparable and comp.verdict is Verdict.PASS and exit_code([comp]) == 0
    assert comp.notes[0] == _line(clean)
    assert sum("compared across an upgrade" in n for n in comp.notes) == 1  # one line per suite, not per check
    assert all(d.accepted for d in comp.env_differences)
    assert not any("likely cause" in k.message for c in comp.cases for k in c.checks)


def test_a_regression_across_an_upgrade_names_it_as_the_likely_cause(regressed, elementwise) -> None:
    comp = compare(regressed, elementwise, _upgraded())
    assert exit_code([comp]) == 1
    checks = [k for c in comp.cases for k in c.checks]
    worse = [k for k in checks if k.verdict is Verdict.REGRESSED]
    assert worse and not any(k.verdict is Verdict.INCOMPARABLE for k in checks)
    assert not any("likely cause" in k.message for k in checks)  # said once per variant, in its cause
    causes = [v.cause for c in comp.cases for v in c.variants if v.cause is not None]
    assert [(c.case, v.variant) for c in comp.cases for v in c.variants if v.cause] == [("scale_relu_add", "fused")]
    (cause,) = causes
    assert f"driver 580.65.06 -> {regressed.env['driver_version']}" in cause.said(), cause
    # The same verdicts as against the baseline of this environment: only the words differ.
    same = compare(regressed, elementwise, BASELINE)
    assert [(k.case, k.variant, k.quantity, k.verdict) for k in checks] == [
        (k.case, k.variant, k.quantity, k.verdict) for c in same.cases for k in c.checks
    ]


def test_an_ncu_patch_is_an_upgrade_another_release_is_not(clean, elementwise) -> None:
    patch = compare(clean, elementwise, replace(BASELINE, env={**BASELINE.env, "ncu_version": "2025.3.0.0"}))
    assert patch.verdict is Verdict.PASS
    assert patch.notes[0].endswith("ncu 2025.3.0.0 -> 2025.3.1.0")
    release = compare(clean, elementwise, replace(BASELINE, env={**BASELINE.env, "ncu_version": "2025.2.1.0"}))
    assert not release.comparable and exit_code([release]) == 3
    assert not any("compared across an upgrade" in n for n in release.notes)


@pytest.mark.parametrize(
    ("field", "value"),
    [("gpu_name", "NVIDIA H100 80GB HBM3"), ("compute_capability", "10.0"), ("clock_control", "base"),
     ("cache_control", "none"), ("replay_mode", "application")],
)  # fmt: skip
def test_what_changes_a_numbers_meaning_stays_incomparable(clean, elementwise, field: str, value: str) -> None:
    comp = compare(clean, elementwise, _upgraded(**{field: value}))
    assert not comp.comparable and exit_code([comp]) == 3
    assert [d.field for d in comp.env_differences if not d.accepted] == [field]
    gains = [k for c in comp.cases for k in c.checks if k.check is CheckKind.GAIN]
    assert {k.verdict for k in gains} == {Verdict.INCOMPARABLE}
    assert comp.notes[0].startswith(f"not compared with the baseline: recorded under {field} ")
    assert comp.notes[0].endswith(f"--accept-env {field}")  # the upgrade fields need no accepting
    assert sum("not compared with" in n for n in comp.notes) == 1  # one line per suite, not per check


def test_run_across_an_upgrade_says_it_once(in_root, tmp_path: Path) -> None:
    base = tmp_path / "b" / "nvidia-h200" / "elementwise.json"
    base.parent.mkdir(parents=True)
    text = Path("baselines/nvidia-h200/elementwise.json").read_text()
    base.write_text(text.replace('"cupy_version": "14.2.0"', '"cupy_version": "13.6.0"'))
    result = CliRunner().invoke(
        app, ["run", SUITE, "--from-report", str(CLEAN_REPORT), "--baselines", str(tmp_path / "b")]
    )
    assert result.exit_code == 0, result.output
    line = "compared across an upgrade since the baseline: CuPy 13.6.0 -> 14.2.0"
    assert result.stdout.count(line) == 1
    assert "environment differs: cupy_version baseline '13.6.0', now '14.2.0' (accepted)" in result.stdout
    assert "NOT COMPARED" not in result.stdout
