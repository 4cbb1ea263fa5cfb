"""Every shipped suite, re-analysed from the report recorded on an H200, against its committed
baseline: the whole pipeline for every fusion pattern, without a GPU."""

import json
from pathlib import Path

import pytest
from helpers import REPORTS, SUITES
from typer.testing import CliRunner

from fuseci.cli import app
from fuseci.config import names
from fuseci.config.parse import load_suite

#: Suites of whole models (ledger variants): their report holds the NVTX range of every ATen op of
#: each compiled forward (``emit_nvtx``), 79 MB for suites/models.yaml on an H200, far over what a
#: fixture may be; their pipeline is tested from real captures and ncu rows (tests/test_ledger_*.py)
#: and from the ledgers recorded on each card (below).
LEDGER_SUITES = ("model_mutants", "models")
SUITE_NAMES = sorted(p.stem for p in SUITES.glob("*.yaml") if p.stem not in LEDGER_SUITES)


def test_the_model_suites_have_baselines_and_ledgers_on_both_cards() -> None:
    from fuseci.ledger import store

    for name in LEDGER_SUITES:
        suite = load_suite(SUITES / f"{name}.yaml")
        assert any(v.ledger is not None for c in suite.cases for v in c.variants), name
        for card in ("nvidia-h200", "nvidia-h100-80gb-hbm3"):
            baseline = SUITES.parent / "baselines" / card / f"{name}.json"
            ledgers = store.load_suite(store.suite_path(baseline))
            want = {store.key(c.id, v.id) for c in suite.cases for v in c.variants if v.ledger and not v.candidate_for}
            assert baseline.exists() and set(ledgers) == want, (name, card)
            assert all(len(x.rows) >= 4 and x.floor_bytes for x in ledgers.values()), (name, card)


def test_every_suite_has_a_recorded_report_and_baselines() -> None:
    for name in SUITE_NAMES:
        assert (REPORTS / f"{name}.ncu-rep.xz").exists(), name
        assert (REPORTS / f"{name}.harness.json").exists(), name
        assert (SUITES.parent / "baselines" / "nvidia-h200" / f"{name}.json").exists(), name
        # the PyTorch suite's report holds the modules of cuBLAS's and cuDNN's kernels (2.35 MB)
        assert (REPORTS / f"{name}.ncu-rep.xz").stat().st_size < 2_500_000


@pytest.mark.parametrize("name", SUITE_NAMES)
def test_recorded_suite_passes_against_its_baseline(name: str, in_root, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = CliRunner().invoke(
        app, ["run", f"suites/{name}.yaml", "--from-report", str(REPORTS / f"{name}.ncu-rep.xz"), "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    (suite,) = doc["suites"]
    warnings = [
        (k["variant"], k["quantity"]) for case in suite["cases"] for k in case["checks"] if k["verdict"] == "warn"
    ]
    assert suite["verdict"] == ("warn" if warnings else "pass")
    verdicts = {k["verdict"] for case in suite["cases"] for k in case["checks"]}
    assert verdicts <= {"pass", "warn"}
    # The only warnings: fused kernels that keep under half the warps an SM can hold (one warp
    # per row with the row in registers: fast, but at low occupancy by design).
    assert {q for _, q in warnings} <= {names.OCC_ACHIEVED}
    loaded = load_suite(SUITES / f"{name}.yaml")
    assert {c["case"] for c in suite["cases"]} == {c.id for c in loaded.cases}
    if loaded.planted:  # its variants are broken on purpose: tests/test_mutants.py judges them
        return
    for case in suite["cases"]:
        fused = [v for v in case["variants"] if v["variant"] != "unfused"]
        (unfused,) = [v for v in case["variants"] if v["variant"] == "unfused"]
        # every fused variant is one kernel, but where a library call stays one (a cuBLAS GEMM
        # before its fused epilogue): fewer launches than unfused, all the same
        assert fused and all(
            v["values"]["launches"] == 1 or v["values"]["launches"] < unfused["values"]["launches"] for v in fused
        ), case["case"]
        assert all(v["gains"]["dram__bytes.sum"] >= 0.9 for v in fused), case["case"]
