"""Results that hold fusion ledgers, for the reporters' tests: ledgers built from the real captures
of tests/data/ledger (an H200's Inductor artifacts and ncu rows), and a judged suite whose
compiled variant carries one, its baseline's, and the gate's findings as ledger checks, as a run
of a model suite makes them."""

from __future__ import annotations

import functools
import json
import lzma
from pathlib import Path
from typing import Any

import ledgers as L
from helpers import in_range

from fuseci.judge.verdict import CaseResult, CheckKind, Comparison, MetricDelta, VariantMeasurement, Verdict
from fuseci.ledger.build import build
from fuseci.ledger.diff import diff
from fuseci.ledger.gate import judge
from fuseci.records.fusion import Ledger

DATA = Path(__file__).resolve().parent.parent / "data" / "ledger"
ENV: dict[str, Any] = {
    "gpu_name": "NVIDIA H200",
    "compute_capability": "9.0",
    "driver_version": "580.95.05",
    "cuda_runtime": "12.8",
    "torch_version": "2.11.0",
    "triton_version": "3.6.0",
    "ncu_version": "2025.3.1",
    "clock_control": "base",
    "cache_control": "all",
}


def _json(name: str) -> Any:
    return json.loads(lzma.decompress((DATA / f"{name}.xz").read_bytes()))


@functools.cache
def real_ledger(case: str) -> Ledger:
    """The ledger of ``case`` (``block-base``, ``block-break_add_norm``...) as fuseci builds it."""
    rows = L.kernel_rows(_json("kernels.json"))
    return build(L.capture(_json(f"{case}.json")), in_range(rows, f"{case}.compiled"))


def ledger_checks(case: str, variant: str, baseline: Ledger, current: Ledger) -> tuple[MetricDelta, ...]:
    """The gate's findings as :mod:`fuseci.api.ledgers` makes them checks: one ledger check each
    (quantity: the finding's kind), and a passing one of the forward's bytes with its values."""
    verdict = judge(baseline, current)
    checks = [
        MetricDelta(case, variant, CheckKind.LEDGER, f.kind.value, f.verdict, f.message) for f in verdict.findings
    ]
    total = MetricDelta(
        case,
        variant,
        CheckKind.LEDGER,
        "bytes",
        Verdict.PASS,
        "the forward's DRAM bytes within their band",
        current=current.measured_bytes,
        baseline_value=baseline.measured_bytes,
        change=current.measured_bytes / baseline.measured_bytes - 1,
    )
    return (*checks, total)


def ledger_comparison(current: str = "block-break_add_norm", baseline: str | None = "block-base") -> Comparison:
    """A model suite of one case, ``block``: ``eager`` without a ledger, ``compiled`` with the
    ledger of the capture ``current`` judged against that of ``baseline`` (None: no baseline)."""
    now = real_ledger(current)
    before = real_ledger(baseline) if baseline else None
    checks = ledger_checks("block", "compiled", before, now) if before else ()
    variants = (
        VariantMeasurement("eager", {}, {}, ()),
        VariantMeasurement(
            "compiled",
            {},
            {},
            (),
            ledger=now,
            baseline_ledger=before,
            ledger_changes=tuple(diff(before, now)) if before else (),
        ),
    )
    case = CaseResult("block", 7, "a pre-norm transformer block in bf16", checks, variants)
    return Comparison(
        suite="models",
        suite_path="suites/models.yaml",
        env=ENV,
        baseline_path="baselines/nvidia-h200/models.json",
        has_baseline=before is not None,
        env_differences=(),
        cases=(case,),
    )
