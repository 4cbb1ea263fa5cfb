"""Counted quantities across edits and profiled passes (fuseci/judge/counters.py, the passes of
fuseci/frames/report.py), the cause line of a time regression after autotuning, and the planted
source edits of kernels/edits.py."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from helpers import REPORTS, ROOT, SUITES

from fuseci.config import names, quantities
from fuseci.config.parse import load_suite
from fuseci.frames import metrics
from fuseci.frames.inventory import KernelLaunch, same_build, spread_of
from fuseci.frames.report import fold_passes, kernel_columns, read_report
from fuseci.judge import update
from fuseci.judge.baseline import Baseline, VariantBaseline, from_results
from fuseci.judge.checks import VariantContext
from fuseci.judge.compare import compare
from fuseci.judge.counters import counted_check
from fuseci.judge.verdict import CheckKind, MetricDelta, Verdict
from fuseci.records.harness import read_record
from fuseci.store import baselines as bl

LOADED = names.GLOBAL_LOAD_BYTES
WORK = names.INSTRUCTIONS


# --- profiled passes: the per-kernel frame keeps the first pass and how far each count moved -----


def _rows(again: int, loaded: list[float], kernels: tuple[str, ...] = ("k0", "k1")) -> list[dict[str, object]]:
    return [
        {
            names.SUITE: "s",
            names.CASE: "c",
            names.VARIANT: "fused",
            names.KERNEL_INDEX: i,
            names.KERNEL: k,
            names.PASS: again,
            LOADED: loaded[i],
            WORK: 100.0 + i,
        }
        for i, k in enumerate(kernels)
    ]


def _frame(*rows: list[dict[str, object]]) -> pd.DataFrame:
    return pd.DataFrame.from_records([r for rs in rows for r in rs], columns=[*kernel_columns(), names.PASS])


def test_a_variant_profiled_three_times_keeps_its_first_pass_and_the_spread() -> None:
    frame = _frame(_rows(0, [64.0, 32.0]), _rows(1, [64.0, 96.0]), _rows(2, [64.0, 64.0]))
    folded = fold_passes(frame)
    assert list(folded.columns) == list(kernel_columns()) and len(folded) == 2
    assert list(folded[LOADED]) == [64.0, 32.0]  # the first pass's counts
    assert list(folded[names.spread_column(LOADED)]) == [0.0, 64.0]  # max - min over the passes
    assert list(folded[names.spread_column(WORK)]) == [0.0, 0.0]
    (k0, k1) = metrics.inventory(folded, "c", "fused")
    assert k0.counts[LOADED] == 64.0 and k0.spread == {LOADED: 0.0, WORK: 0.0}
    assert k1.spread[LOADED] == 64.0 and spread_of((k0, k1), LOADED) == 64.0


def test_one_pass_has_no_spread_and_a_repeat_of_other_kernels_says_nothing() -> None:
    once = fold_passes(_frame(_rows(0, [64.0, 32.0])))
    assert once[names.spread_column(LOADED)].isna().all()
    kernels = metrics.inventory(once, "c", "fused")
    assert all(k.spread == {} for k in kernels) and spread_of(kernels, LOADED) is None
    other = fold_passes(_frame(_rows(0, [64.0, 32.0]), _rows(1, [64.0, 32.0], ("k0", "k2"))))
    assert other[names.spread_column(LOADED)].isna().all()  # nothing to pair a kernel with


def test_repeat_ranges_are_named_and_parsed() -> None:
    assert names.range_name("s", "c", "v") == "fuseci:s:c:v"
    assert names.range_name("s", "c", "v", 2) == "fuseci:s:c:v:2"
    assert names.parse_range("fuseci:s:c:v:2") == ("s", "c", "v", 2)
    assert names.parse_range("fuseci:s:c:v") == ("s", "c", "v", 0)
    for bad in ("fuseci:s:c:v:0", "fuseci:s:c:v:01", "fuseci:s:c:v:x", "fuseci:s:c:v:1:2", "fuseci:s:c:v:１"):
        assert names.parse_range(bad) is None, bad


# --- baselines keep each kernel's counts, and read the files written before ------------------------


def _baseline(kernels: tuple[KernelLaunch, ...]) -> Baseline:
    values = {LOADED: sum(k.counts.get(LOADED, 0) for k in kernels)}
    return Baseline("s", {"gpu_name": "G"}, {"c": {"fused": VariantBaseline(values, kernels)}})


def test_a_baseline_keeps_each_kernels_counts_and_spread() -> None:
    kernels = (
        KernelLaunch("k0", 132, 384, 168, 0, counts={LOADED: 64.0, WORK: 183152288.0}, spread={WORK: 49952.0}),
        KernelLaunch("k1", 4, 256, 28, 16, counts={LOADED: 32.0}),
        KernelLaunch("k2", 1, 32, 8),
    )
    text = bl.dumps(_baseline(kernels))
    doc = json.loads(text)
    assert doc["format_version"] == 2
    rows = doc["cases"]["c"]["fused"]["kernels"]
    assert rows[0] == ["k0", 132, 384, 168, 0, {"counts": {LOADED: 64, WORK: 183152288}, "spread": {WORK: 49952}}]
    assert rows[1] == ["k1", 4, 256, 28, 16, {"counts": {LOADED: 32}}] and rows[2] == ["k2", 1, 32, 8]
    back = Baseline.from_json(doc, "b.json").cases["c"]["fused"].kernels
    assert back == kernels and bl.dumps(Baseline.from_json(doc, "b.json")) == text


def test_a_version_1_baseline_reads_without_counts(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    old = {
        "format_version": 1,
        "suite": "s",
        "env": {},
        "cases": {"c": {"fused": {"values": {LOADED: 96}, "kernels": [["k0", 1, 32, 8], ["k1", 2, 64, 16, 1024]]}}},
    }
    path.write_text(json.dumps(old), encoding="utf-8")
    loaded = bl.load_baseline(path)
    assert loaded is not None
    (k0, k1) = loaded.cases["c"]["fused"].kernels
    assert (k0.counts, k0.spread, k1.shared_mem) == ({}, {}, 1024)
    newer = {**old, "format_version": 3}
    path.write_text(json.dumps(newer), encoding="utf-8")
    with pytest.raises(Exception, match="written by a newer fuseci"):
        bl.load_baseline(path)


@pytest.mark.parametrize(
    "row",
    [["k", 1, 2, 3, 0, {"counts": {LOADED: -1}}], ["k", 1, 2, 3, 0, {"count": {}}], ["k", 1, 2, 3, 0, {}, 7]],
)
def test_a_hostile_kernel_row_is_refused_with_its_place(row: list[object]) -> None:
    doc = {"format_version": 2, "suite": "s", "env": {}, "cases": {"c": {"fused": {"values": {}, "kernels": [row]}}}}
    with pytest.raises(Exception, match=r"b\.json: cases\.c\.fused\.kernels\[0\]"):
        Baseline.from_json(doc, "b.json")


def test_an_update_re_records_a_case_whose_baseline_lacks_the_counts() -> None:
    """A legacy case that passes would keep its old values byte for byte, and with them no counts
    and no spread for good: it is re-recorded instead."""
    old = VariantBaseline({LOADED: 96.0}, (KernelLaunch("k", 1, 32, 8),))
    fresh = VariantBaseline(
        {LOADED: 96.0, names.TMA_LOAD_BYTES: 0.0},
        (KernelLaunch("k", 1, 32, 8, counts={LOADED: 96.0}, spread={LOADED: 0.0}),),
    )
    assert update.outdated({"fused": old}, {"fused": fresh})
    assert not update.outdated({"fused": fresh}, {"fused": fresh})


# --- judging: the recorded mutants, their baseline with passes ---------------------------------


@pytest.fixture(scope="module")
def recorded():  # type: ignore[no-untyped-def]
    suite = load_suite(SUITES / "mutants.yaml")
    results = metrics.summarize(
        read_report(REPORTS / "mutants.ncu-rep.xz"), read_record(REPORTS / "mutants.harness.json")
    )
    return suite, results, from_results(results, {c.id for c in suite.cases})


def _passes(baseline: Baseline, spread: float = 0.0) -> Baseline:
    """``baseline`` as a baseline recorded with several passes holds it: each count moved by ``spread``."""
    cases = {
        cid: {
            vid: replace(e, kernels=tuple(replace(k, spread={q: spread for q in k.counts}) for k in e.kernels))
            for vid, e in vs.items()
        }
        for cid, vs in baseline.cases.items()
    }
    return replace(baseline, cases=cases)


def _check(comparison, variant: str, quantity: str, case: str = "scale_relu_add") -> MetricDelta:  # type: ignore[no-untyped-def]
    (k,) = [
        k
        for c in comparison.cases
        for k in c.checks
        if k.case == case and k.variant == variant and k.quantity == quantity and k.check is CheckKind.VALUE
    ]
    return k


def test_a_healthy_run_passes_every_counted_gate_against_a_baseline_with_passes(recorded) -> None:  # type: ignore[no-untyped-def]
    suite, results, baseline = recorded
    comparison = compare(results, suite, _passes(baseline))
    counted = [
        k
        for c in comparison.cases
        for k in c.checks
        if quantities.get(k.quantity) and quantities.get(k.quantity).counted
    ]
    assert counted and not comparison.notes
    fused = [k for k in counted if k.variant == "fused"]
    assert {k.quantity for k in fused} >= {LOADED, names.GLOBAL_STORE_BYTES, WORK, names.L2_READ_BYTES}
    assert all(k.verdict is Verdict.PASS and "not gated" not in k.message for k in fused)


def test_a_legacy_baseline_is_said_once_per_suite(recorded) -> None:  # type: ignore[no-untyped-def]
    suite, results, baseline = recorded
    comparison = compare(results, suite, baseline)  # one pass, as version-1 baselines were recorded
    (note,) = comparison.notes
    assert "the baseline was profiled once" in note and "re-record it (`fuseci update-baselines " in note
    shown = _check(comparison, "fused", WORK)
    assert shown.message.endswith("mutants.yaml`) to gate them")
    assert shown.tolerance == ""  # shown, not gated: no tolerance in the results file either
    assert shown.not_gated and shown.message.endswith(f"not gated: {shown.not_gated}")
    assert _check(comparison, "fused", LOADED).verdict is Verdict.PASS  # bytes: gated all the same
    assert _check(comparison, "fused", LOADED).tolerance == "exact"
    passes = _passes(baseline)
    entry = passes.cases["scale_relu_add"]["fused"]
    older = {q: x for q, x in entry.values.items() if q != LOADED}
    cases = {
        **passes.cases,
        "scale_relu_add": {**passes.cases["scale_relu_add"], "fused": replace(entry, values=older)},
    }
    comparison = compare(results, suite, replace(passes, cases=cases))
    assert not [k for k in comparison.cases[0].checks if k.variant == "fused" and k.quantity == LOADED]
    (note,) = comparison.notes
    assert note.startswith("the baseline was recorded before fuseci counted global bytes loaded: judged without them")
    assert "profiled once" not in note
    # a report recorded before fuseci counted TMA bytes, judged against a baseline that has them
    kernels = results.kernels.copy()
    kernels[names.TMA_LOAD_BYTES] = float("nan")
    older_report = metrics.summarize(kernels, results.record)
    counting = replace(suite, ncu=replace(suite.ncu, tma=True))
    (note,) = compare(older_report, counting, passes).notes
    assert note.startswith("this run's report was recorded before fuseci counted TMA bytes loaded: judged without them")
    # a suite that leaves the TMA out (ncu: {tma: false}) does not count it: nothing to say
    assert not suite.ncu.tma and compare(older_report, suite, passes).notes == ()


def test_a_library_kernels_moving_count_passes_within_its_floor(recorded) -> None:  # type: ignore[no-untyped-def]
    """A kernel whose instructions moved over the baseline's passes (a persistent GEMM, cuDNN's
    flash attention) may move by 2% of its own count at least, however little its passes moved."""
    suite, results, baseline = recorded
    entry = baseline.cases["scale_relu_add"]["fused"]
    count = entry.values[WORK]
    moved = 2.0  # a move far smaller than the floor
    kernels = tuple(replace(k, spread={q: (moved if q == WORK else 0.0) for q in k.counts}) for k in entry.kernels)
    for now, verdict in ((count * 0.985, Verdict.PASS), (count * 0.97, Verdict.REGRESSED)):
        shifted = VariantBaseline({**entry.values, WORK: now}, kernels)
        cases = {**baseline.cases, "scale_relu_add": {**baseline.cases["scale_relu_add"], "fused": shifted}}
        k = _check(compare(results, suite, replace(baseline, cases=cases)), "fused", WORK)
        # 2% of the kernel's count over the baseline's total
        assert k.verdict is verdict and re.search(r"band ±2\.[01]%\)", k.message), k.message
        assert k.band == pytest.approx(0.02, abs=0.001) and f"band ±{k.band:.1%})" in k.message
        assert "in 1 kernel(s), each allowed 2% of its own count at least" in k.message, k.message


def _aa_run(**counts: float) -> VariantContext:
    """The H200 A/A run whose cuDNN attention kernel executed 0.56% more instructions than its
    baseline (tests/data/aa/README.md), as the judge sees it; ``counts`` add to this run's count
    of the kernels named (``triton_poi_fused_gelu_view_2=1``)."""
    doc = json.loads((ROOT / "tests" / "data" / "aa" / "h200-prenorm-compiled.json").read_text())
    suite = load_suite(ROOT / "suites" / "models.yaml")
    (case,) = [c for c in suite.cases if c.id == "prenorm"]
    (variant,) = [v for v in case.variants if v.id == "compiled"]

    def launch(row: dict[str, Any], extra: float = 0.0) -> KernelLaunch:
        counts = {**row["counts"], WORK: row["counts"][WORK] + extra}
        shape = (row["grid"], row["block"], row["registers"], row.get("shared_mem", 0))
        return KernelLaunch(row["name"], *shape, counts=counts, spread=row.get("spread", {}))

    old = tuple(launch(r) for r in doc["baseline_kernels"])
    new = tuple(launch(r, counts.get(str(r["name"]), 0.0)) for r in doc["kernels"])
    values = {WORK: sum(k.counts[WORK] for k in new)}
    baseline = Baseline(
        suite.name,
        {"gpu_name": doc["card"]},
        {"prenorm": {"compiled": VariantBaseline({WORK: sum(k.counts[WORK] for k in old)}, old)}},
    )
    return VariantContext(case, variant, values, None, new, {}, baseline)


def test_a_flash_attention_kernels_instructions_moving_in_one_run_of_ten_pass() -> None:
    """The H200's A/A false alarm: cuDNN's attention kernel moved by 121,100 instructions in one run
    where its three passes had moved by 2,224 (the old band, 0.10% of the variant, failed it); the
    generated kernels repeated theirs exactly."""
    k = counted_check(_aa_run(), WORK)
    assert k is not None and k.verdict is Verdict.PASS, k
    assert "it moved by up to 2,666 over the profiled passes, in 5 kernel(s)" in k.message, k.message


@pytest.mark.parametrize("extra", [1.0, 64.0])
def test_a_generated_kernel_that_executes_more_is_caught_beside_moving_library_kernels(extra: float) -> None:
    """The library kernels' band is theirs: one instruction more in a generated kernel that
    repeated exactly regresses, though the variant's total is well within that band."""
    k = counted_check(_aa_run(triton_poi_fused_gelu_view_2=extra), WORK)
    assert k is not None and k.verdict is Verdict.REGRESSED, k
    assert k.message.startswith("instructions executed of compiled rose in the kernels whose count repeats: "), (
        k.message
    )
    assert f"in triton_poi_fused_gelu_view_2 +{extra:,.0f}" in k.message and "within the band" in k.message, k.message


def test_a_moving_kernel_beyond_its_own_floor_regresses() -> None:
    """2% of the attention kernel's count and of the GEMMs' is the band: 1.2 M instructions more in
    the attention kernel (6.1% with the run's own 0.56%) is beyond it, and the message names it."""
    name = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0"
    k = counted_check(_aa_run(**{name: 1.2e6}), WORK)
    assert k is not None and k.verdict is Verdict.REGRESSED, k
    assert "band ±1.1%)" in k.message and f"{name} +6.1%" in k.message, k.message


def test_l2_sectors_that_barely_moved_keep_their_tolerance(recorded) -> None:  # type: ignore[no-untyped-def]
    """Our kernels' L2 sectors move by a few thousandths of a percent (what warps share through the
    L1): eight times that is inside the 0.5% tolerance, which holds; the moving floor (25%) is for
    counts that move by more than the tolerance can take (a library kernel's)."""
    suite, results, baseline = recorded
    entry = baseline.cases["scale_relu_add"]["fused"]
    l2 = names.L2_READ_BYTES
    old = entry.values[l2]
    for moved, shown in ((old * 1e-5, "tolerance ±0.5%"), (old * 0.01, "band ±25.0%")):
        kernels = tuple(replace(k, spread={q: (moved if q == l2 else 0.0) for q in k.counts}) for k in entry.kernels)
        lower = VariantBaseline({**entry.values, l2: old / 1.006}, kernels)  # now 0.6% above the baseline
        cases = {**baseline.cases, "scale_relu_add": {**baseline.cases["scale_relu_add"], "fused": lower}}
        k = _check(compare(results, suite, replace(baseline, cases=cases)), "fused", l2)
        assert shown in k.message, k.message
        assert (k.band is None) == shown.startswith("tolerance"), k.band
        assert k.verdict is (Verdict.REGRESSED if moved < old * 1e-4 else Verdict.PASS), k.message


def test_same_build_compares_names_and_launch_shapes_not_counts() -> None:
    a = (KernelLaunch("k", 1, 2, 3, counts={LOADED: 1.0}),)
    assert same_build(a, (KernelLaunch("k", 1, 2, 3, counts={LOADED: 2.0}),))
    assert not same_build(a, (KernelLaunch("k", 1, 2, 4),))


# --- the planted source edits --------------------------------------------------------------------


def test_every_planted_edit_applies_once_and_leaves_a_valid_module() -> None:
    from kernels.edits import CUDA_EDITS, EDITS, TRITON_EDITS

    assert {e.regression for e in CUDA_EDITS} == {True, False} == {e.regression for e in TRITON_EDITS}
    for edit in EDITS.values():
        healthy = (ROOT / "kernels" / f"{edit.module.rsplit('.', 1)[1]}.py").read_text(encoding="utf-8")
        edited = edit.apply(healthy)
        assert edited != healthy
        ast.parse(edited)  # still Python (the CUDA source is an f-string: its braces must stay doubled)
        with pytest.raises(ValueError, match="occurs 0 times"):
            edit.apply(edited.replace(edit.changes[0][1], ""))


def test_the_planted_suites_catch_each_edit_by_the_bytes_it_costs() -> None:
    """Each planted regression of kernels/edits.py names a byte counter as the check that must
    catch it; each benign edit is judged against the healthy kernel and must pass."""
    from kernels.edits import EDITS

    planted = {}
    for suite in (load_suite(SUITES / "mutants.yaml"), load_suite(SUITES / "pytorch_mutants.yaml")):
        for case in suite.cases:
            for v in case.variants:
                if "bias_gelu_" in v.fn and v.fn.split(":")[1].rsplit("_", 1)[1] in (
                    "sector",
                    "halo",
                    "store",
                    "unrolled",
                    "block",
                    "warps",
                ):
                    planted[v.fn.split(":")[1]] = v
    assert len(planted) == len(EDITS)
    for fn, v in planted.items():
        assert v.candidate_for is not None
        regression = fn.rsplit("_", 1)[1] in ("sector", "halo", "store")
        assert bool(v.caught_by) == regression, fn
        assert all(q in (LOADED, names.GLOBAL_STORE_BYTES) for q in v.caught_by)


def test_a_planted_regression_with_nothing_to_compare_is_not_judged(recorded) -> None:  # type: ignore[no-untyped-def]
    """A card whose baseline predates a planted case (or has none of its values) cannot put the
    gate to the test: the planted check says not judged (NEW), not NOT caught (a failure that no
    gate caused), and says what to record."""
    from fuseci.judge.verdict import exit_code

    suite, results, baseline = recorded
    older = replace(baseline, cases={c: v for c, v in baseline.cases.items() if c != "bias_gelu"})
    comparison = compare(results, suite, older)
    planted = {k.variant: k for c in comparison.cases for k in c.checks if k.check is CheckKind.PLANTED}
    for variant in ("sector", "halo", "store"):
        assert planted[variant].verdict is Verdict.NEW, planted[variant].message
        assert planted[variant].message.startswith(
            "planted regression not judged by l1tex__t_bytes_pipe_lsu_mem_global_op_"
        )
        assert "no baseline value of fused: record one" in planted[variant].message
    assert planted["defused"].verdict is Verdict.PASS  # its own case's baseline is there: caught
    assert exit_code([comparison]) == 0
