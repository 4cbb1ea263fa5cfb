"""The checks added to the gain gates: the noise-aware CUDA-event speedup and its re-measurement,
kernel-inventory diffs, bytes over the minimum, occupancy, and the L2 undercount note."""

import math
from dataclasses import replace

import pytest
from helpers import CLEAN_REPORT, H200_BASELINES, Given, measure_with

from fuseci import api
from fuseci.config import names
from fuseci.config.policy import parse_tolerance
from fuseci.frames.inventory import KernelLaunch, inventory_diff
from fuseci.frames.metrics import summarize
from fuseci.judge import baseline as jb
from fuseci.judge.checks import BORDERLINE_FACTOR, NOISE_Z, time_band, time_noise
from fuseci.judge.compare import compare
from fuseci.judge.verdict import CheckKind, Verdict, exit_code
from fuseci.measure import run as measure_run
from fuseci.measure.run import MeasureOptions
from fuseci.records.harness import VariantTiming
from fuseci.store import baselines as bl

BASELINE = bl.load_baseline(H200_BASELINES / "nvidia-h200" / "elementwise.json")


@pytest.fixture(scope="module")
def clean(elementwise):
    return measure_run.measure(elementwise, MeasureOptions(from_report=CLEAN_REPORT))


def _with_fused_time(baseline, factor: float, iqr_factor: float = 1.0):
    """The baseline with scale_relu_add's fused median time scaled (a faster baseline: factor < 1)."""
    case = dict(baseline.cases["scale_relu_add"])
    values = dict(case["fused"].values)
    values[names.EVENT_TIME] *= factor
    values[names.EVENT_TIME_IQR] *= iqr_factor
    case["fused"] = replace(case["fused"], values=values)
    return replace(baseline, cases={**baseline.cases, "scale_relu_add": case})


def _check(comparison, case="scale_relu_add", variant="fused", check="gain", quantity=names.EVENT_TIME):
    return next(
        k
        for c in comparison.cases
        for k in c.checks
        if (k.case, k.variant, k.check.value, k.quantity) == (case, variant, check, quantity)
    )


def test_time_noise_is_the_standard_error_of_the_median() -> None:
    values = {names.EVENT_TIME: 1000.0, names.EVENT_TIME_IQR: 13.49, names.EVENT_TIME_REPEATS: 25}
    assert time_noise(values) == pytest.approx(1.2533 * 10 / 5 / 1000)
    assert math.isnan(time_noise({}))
    assert time_band(0.10, [0.001, 0.002]) == 0.10  # quiet: the tolerance rules
    assert time_band(0.10, [0.03, 0.04, math.nan]) == pytest.approx(NOISE_Z * 0.05)  # noisy: widened


def test_speedup_within_tolerance_passes_and_a_small_fall_is_borderline(clean, elementwise) -> None:
    assert _check(compare(clean, elementwise, BASELINE)).verdict is Verdict.PASS
    # A baseline 15% faster: the speedup fell 13%, outside ±10% but within 3x of it.
    fell = _check(compare(clean, elementwise, _with_fused_time(BASELINE, 0.87)))
    assert fell.verdict is Verdict.REGRESSED and fell.retry
    assert "borderline: re-measure" in fell.message and "band ±10.0%" in fell.message
    assert fell.band is None and fell.timed_passes == 0  # the tolerance as written, one timed pass
    # Far past the band: a regression at once, no re-measurement.
    far = _check(compare(clean, elementwise, _with_fused_time(BASELINE, 0.5)))
    assert far.verdict is Verdict.REGRESSED and not far.retry and -far.change > BORDERLINE_FACTOR * 0.10


def test_noise_widens_the_band(clean, elementwise) -> None:
    """A baseline whose calls were all over the place cannot resolve a 13% change."""
    noisy = _with_fused_time(BASELINE, 0.87, iqr_factor=400.0)
    k = _check(compare(clean, elementwise, noisy))
    assert k.verdict is Verdict.PASS and "widened by measured noise" in k.tolerance
    assert k.band is not None and k.tolerance.startswith(f"±{k.band:.1%}")


def test_remeasure_pools_the_passes_and_rewrites_the_record(clean, elementwise, tmp_path, monkeypatch) -> None:
    calls = []

    def fake_timed_pass(suite, options, record, cases, *, again=False):
        calls.append((tuple(cases), again))
        case = record.cases["scale_relu_add"]
        slower = tuple(replace(t, median_ns=t.median_ns * (1.2 if t.variant == "fused" else 1.0)) for t in case.timings)
        return replace(
            record, cases={**record.cases, "scale_relu_add": replace(case, retimings=(*case.retimings, slower))}
        )

    monkeypatch.setattr(measure_run, "timed_pass", fake_timed_pass)
    options = MeasureOptions(report_dir=tmp_path)
    again = clean
    for _ in range(measure_run.RETIMES):  # as the session re-measures a borderline case
        again = measure_run.retime(elementwise, options, again, ["scale_relu_add"])
    assert calls == [(("scale_relu_add",), True)] * measure_run.RETIMES
    rec = again.record.cases["scale_relu_add"]
    assert len(rec.retimings) == measure_run.RETIMES
    first = next(t for t in rec.timings if t.variant == "fused")
    fused = again.variant_values("scale_relu_add", "fused")
    assert fused[names.EVENT_TIME] == pytest.approx(first.median_ns * 1.2)  # median of 1.0, 1.2, 1.2
    assert fused[names.EVENT_TIME_REPEATS] == 3 * first.repeats
    assert (tmp_path / "elementwise.harness.json").exists()
    k = _check(compare(again, elementwise, BASELINE))
    assert "median of 3 timed passes" in k.message and k.timed_passes == 3 and not k.retry


def test_check_remeasures_only_borderline_cases(clean, elementwise, tmp_path, monkeypatch) -> None:
    root = tmp_path / "baselines"
    bl.save_baseline(_with_fused_time(BASELINE, 0.87), root / "nvidia-h200" / "elementwise.json")
    seen = measure_with(monkeypatch, Given(clean)).retimed
    api.check(elementwise, api.RunOptions(baselines=root, report_dir=tmp_path))
    assert seen == [["scale_relu_add"]] * measure_run.RETIMES
    seen.clear()  # a re-analysed report cannot be re-measured: its verdict stands
    comp = api.check(elementwise, api.RunOptions(baselines=root, from_report=CLEAN_REPORT))
    assert seen == [] and _check(comp).verdict is Verdict.REGRESSED


def test_timing_gate_is_skipped_with_a_note_when_the_record_was_not_timed(clean, elementwise) -> None:
    untimed = summarize(clean.kernels, replace(clean.record, profiler=replace(clean.record.profiler, timed=False)))
    comp = compare(untimed, elementwise, BASELINE)
    assert not any(k.quantity == names.EVENT_TIME for c in comp.cases for k in c.checks)
    assert all(any(n.startswith("not timed:") for n in c.notes) for c in comp.cases)


def _k(name: str, grid: int = 1056, registers: int = 32) -> KernelLaunch:
    return KernelLaunch(name, grid, 256, registers)


def test_inventory_diff_names_each_kind_of_change() -> None:
    a, b, c = _k("a"), _k("b"), _k("c")
    assert inventory_diff([a], [a]) == []
    assert inventory_diff([a], [b, c]) == ["split: a became b + c"]
    assert inventory_diff([b, c], [a]) == ["merged: b + c became a"]
    assert inventory_diff([a], [a, c]) == ["new kernel: c"]
    assert inventory_diff([a], [a, a]) == ["extra launch: a"]
    assert inventory_diff([a, b], [a]) == ["vanished kernel: b"]
    assert inventory_diff([a], [b]) == ["replaced: a by b"]
    assert inventory_diff([a], [_k("a", grid=528, registers=64)]) == ["a: grid 1056 -> 528, registers 32 -> 64"]


def test_fewer_kernels_is_an_improvement_and_more_a_regression(clean, elementwise) -> None:
    case = dict(BASELINE.cases["scale_relu_add"])
    two = (_k("fuseci_scale_relu"), _k("fuseci_add"))
    case["fused"] = replace(case["fused"], kernels=two)
    merged = compare(clean, elementwise, replace(BASELINE, cases={**BASELINE.cases, "scale_relu_add": case}))
    k = _check(merged, check="inventory", quantity="kernels")
    assert k.verdict is Verdict.IMPROVED and "merged: fuseci_scale_relu + fuseci_add became" in k.message


def test_bytes_over_the_allowance_fail_and_the_allowance_can_be_off(clean, elementwise) -> None:
    tight = replace(
        elementwise,
        cases=tuple(replace(c, bytes_allowance=replace(c.bytes_allowance, relative=-0.05)) for c in elementwise.cases),
    )
    k = _check(compare(clean, tight, BASELINE), check="bytes", quantity=names.BYTES_RATIO)
    assert k.verdict is Verdict.REGRESSED and "the minimum DRAM bytes" in k.message
    ok = _check(compare(clean, elementwise, BASELINE), check="bytes", quantity=names.BYTES_RATIO)
    assert ok.verdict is Verdict.PASS and 0.9 < ok.current <= 1.0


def _occupancy_was(percent: float, *, event_time_factor: float = 1.0):
    """BASELINE with the fused bias_gelu at ``percent`` theoretical occupancy (and its event time
    scaled: a factor under 1 makes today's speedup a fall)."""
    case = dict(BASELINE.cases["bias_gelu"])
    values = dict(case["fused"].values)
    values[names.OCC_THEORETICAL] = percent
    values[names.EVENT_TIME] = values[names.EVENT_TIME] * event_time_factor
    case["fused"] = replace(case["fused"], values=values)
    return replace(BASELINE, cases={**BASELINE.cases, "bias_gelu": case})


def test_an_occupancy_drop_alone_is_a_warning(clean, elementwise) -> None:
    """Occupancy is a cause: a faster kernel may run at lower occupancy. With no time lost it
    warns (exit 0), naming what limits occupancy now."""
    comp = compare(clean, elementwise, _occupancy_was(200.0))
    k = _check(comp, case="bias_gelu", check="value", quantity=names.OCC_THEORETICAL)
    assert k.verdict is Verdict.WARN and "fell from 200.0% to 100.0%" in k.message and "limited by" in k.message
    assert exit_code([comp]) == 0


def test_an_occupancy_drop_is_named_as_the_likely_why_of_a_time_regression(clean, elementwise) -> None:
    comp = compare(clean, elementwise, _occupancy_was(200.0, event_time_factor=0.5))
    speedup = _check(comp, case="bias_gelu", check="gain", quantity=names.EVENT_TIME)
    assert speedup.verdict is Verdict.REGRESSED
    assert "likely why: theoretical occupancy of fused fell from 200.0% to 100.0%" in speedup.message
    # Named there, not a check of its own; the exact counters of the same kernel still hold.
    values = [k for c in comp.cases for k in c.checks if k.check is CheckKind.VALUE and k.case == "bias_gelu"]
    assert not [k for k in values if k.quantity in (names.OCC_THEORETICAL, names.OCC_ACHIEVED)]
    assert values and all(k.verdict is Verdict.PASS for k in values)


def test_an_occupancy_the_suite_gates_is_a_hard_gate(clean, elementwise) -> None:
    gated = replace(
        elementwise,
        cases=tuple(
            replace(c, gates={**c.gates, names.OCC_THEORETICAL: parse_tolerance("5%")}) for c in elementwise.cases
        ),
    )
    k = _check(
        compare(clean, gated, _occupancy_was(200.0)), case="bias_gelu", check="value", quantity=names.OCC_THEORETICAL
    )
    assert k.verdict is Verdict.REGRESSED and "fell from 200.0% to 100.0%" in k.message


def test_undercounted_dram_writes_are_noted(clean, elementwise) -> None:
    comp = compare(clean, elementwise, BASELINE)
    note = next(n for n in comp.cases[0].notes if n.startswith("DRAM writes undercount"))
    assert "still there when the kernel ended" in note and ", fused 17.4 MB of 268.4 MB (6%);" in note


def test_timings_reach_the_baseline(clean) -> None:
    fresh = jb.from_results(clean, {"scale_relu_add"})
    values = fresh.cases["scale_relu_add"]["fused"].values
    assert values[names.EVENT_TIME] > 0 and values[names.EVENT_TIME_REPEATS] == 30
    assert values[names.MIN_BYTES] == 3 * 64 * 2**20 * 4
    assert isinstance(clean.record.cases["scale_relu_add"].timings[0], VariantTiming)


NORMALIZATION_REPORT = CLEAN_REPORT.with_name("normalization.ncu-rep.xz")


def _low_occupancy_warnings(comparison) -> dict[str, str]:
    return {
        k.case: k.message
        for c in comparison.cases
        for k in c.checks
        if k.check is CheckKind.VALUE and k.quantity == names.OCC_ACHIEVED and k.verdict is Verdict.WARN
    }


def test_low_occupancy_at_the_memory_roof_is_no_warning(in_root) -> None:
    """The LayerNorm kernels keep whole rows in registers: 32-41% achieved occupancy, at 79-82% of
    the card's DRAM peak. More warps could not make them faster: nothing to warn about."""
    from fuseci.config.parse import load_suite

    suite = load_suite("suites/normalization.yaml")
    results = measure_run.measure(suite, MeasureOptions(from_report=NORMALIZATION_REPORT))
    baseline = bl.load_baseline(H200_BASELINES / "nvidia-h200" / "normalization.json")
    assert results.variant_values("add_layernorm", "fused")[names.OCC_ACHIEVED] < 35
    assert _low_occupancy_warnings(compare(results, suite, baseline)) == {}

    # The same kernel at half the bandwidth: latency-bound, and too few warps is the likely why.
    def fused_layernorm(**changes: float) -> tuple[dict, ...]:
        return tuple(
            {**row, **changes} if (row[names.CASE], row[names.VARIANT]) == ("add_layernorm", "fused") else row
            for row in results.variant_rows
        )

    row = results.variant_values("add_layernorm", "fused")
    half = {rate: row[rate] / 2 for rate in (names.DRAM_READ_RATE, names.DRAM_WRITE_RATE)}
    warned = _low_occupancy_warnings(compare(replace(results, variant_rows=fused_layernorm(**half)), suite, baseline))
    assert list(warned) == ["add_layernorm"]
    assert (
        "keeps only 32.1% of the warps" in warned["add_layernorm"] and "limited by registers" in warned["add_layernorm"]
    )
    # The same slow kernel loading through the TMA (a cuBLAS GEMM, cuDNN's attention): its few
    # warps are its design (warp-specialised), not a cause: no warning.
    tma = fused_layernorm(**half, **{names.TMA_LOAD_BYTES: 2.0**30})
    assert _low_occupancy_warnings(compare(replace(results, variant_rows=tma), suite, baseline)) == {}
