from dataclasses import replace

import pytest
from helpers import CLEAN_REPORT, H200_BASELINES, REGRESSED_REPORT

from fuseci.frames.metrics import summarize
from fuseci.judge.compare import compare
from fuseci.judge.verdict import CheckKind, Verdict, exit_code
from fuseci.measure import run as measure_run
from fuseci.measure.run import MeasureOptions
from fuseci.records.harness import CaseRecord, CaseStatus, CheckRecord
from fuseci.store import baselines as bl

#: The exact counters gated on fused variants that launch the baseline's kernels.
COUNTERS = (
    "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum",
    "smsp__inst_executed.sum",
    "lts__t_bytes_srcunit_tex_op_read.sum",
)
BASELINE = bl.load_baseline(H200_BASELINES / "nvidia-h200" / "elementwise.json")


def _results(elementwise, report):
    return measure_run.measure(elementwise, MeasureOptions(from_report=report))


@pytest.fixture(scope="module")
def clean(elementwise):
    return _results(elementwise, CLEAN_REPORT)


@pytest.fixture(scope="module")
def regressed(elementwise):
    return _results(elementwise, REGRESSED_REPORT)


def _verdicts(comparison):
    return {(k.case, k.variant, k.check.value, k.quantity): k.verdict for c in comparison.cases for k in c.checks}


def test_clean_run_passes_every_check(clean, elementwise) -> None:
    comp = compare(clean, elementwise, BASELINE)
    assert comp.verdict is Verdict.PASS
    v = _verdicts(comp)
    assert v[("scale_relu_add", "fused", "gain", "dram__bytes.sum")] is Verdict.PASS
    assert v[("scale_relu_add", "fused", "expect", "launches")] is Verdict.PASS
    assert v[("bias_gelu", "fused", "correctness", "")] is Verdict.PASS
    assert v[("scale_relu_add", "fused", "gain", "event_time")] is Verdict.PASS
    assert v[("scale_relu_add", "fused", "asynchrony", "host_blocking")] is Verdict.PASS
    assert v[("scale_relu_add", "fused", "inventory", "kernels")] is Verdict.PASS
    assert v[("scale_relu_add", "fused", "bytes", "dram_bytes_over_min")] is Verdict.PASS
    assert ("scale_relu_add", "fused", "value", "sm__maximum_warps_per_active_cycle_pct") not in v  # not gated
    for q in ("l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum", "smsp__inst_executed.sum"):  # exact, fused only
        assert v[("scale_relu_add", "fused", "value", q)] is Verdict.PASS
        assert ("scale_relu_add", "unfused", "value", q) not in v
    # 5 cases, 16 checks each (2 correctness, 2 inventory, 4 gains, 6 counted bytes and
    # instructions, asynchrony, bytes), 8 expectations
    assert len(v) == 88
    assert exit_code([comp]) == 0


def test_planted_regression_is_caught_where_it_was_planted(regressed, elementwise) -> None:
    comp = compare(regressed, elementwise, BASELINE)
    bad = {key: verdict for key, verdict in _verdicts(comp).items() if verdict is not Verdict.PASS}
    assert bad == {
        ("scale_relu_add", "fused", "gain", "launches"): Verdict.REGRESSED,
        ("scale_relu_add", "fused", "gain", "dram__bytes.sum"): Verdict.REGRESSED,
        ("scale_relu_add", "fused", "gain", "gpu__time_duration.sum"): Verdict.REGRESSED,
        ("scale_relu_add", "fused", "gain", "event_time"): Verdict.REGRESSED,
        ("scale_relu_add", "fused", "inventory", "kernels"): Verdict.REGRESSED,
        ("scale_relu_add", "fused", "bytes", "dram_bytes_over_min"): Verdict.REGRESSED,
        ("scale_relu_add", "fused", "expect", "dram__bytes.sum"): Verdict.REGRESSED,
        ("scale_relu_add", "fused", "expect", "launches"): Verdict.REGRESSED,
        # The split launches other kernels than the baseline's: the bytes they ask of memory are
        # compared all the same (the intermediate written and read back); L2 sectors too.
        **dict.fromkeys(
            (("scale_relu_add", "fused", "value", q) for q in COUNTERS if q != "smsp__inst_executed.sum"),
            Verdict.REGRESSED,
        ),
    }
    counted = [k for c in comp.cases for k in c.checks if k.check is CheckKind.VALUE and k.variant == "fused"]
    for k in (k for k in counted if k.case == "scale_relu_add" and k.quantity in COUNTERS and "inst" not in k.quantity):
        assert "its kernels changed" not in k.message  # said once, in the variant's cause
    (cause,) = [v.cause for c in comp.cases for v in c.variants if (c.case, v.variant) == ("scale_relu_add", "fused")]
    assert cause is not None and "split: fuseci_scale_relu_add became" in cause.said(), cause
    (instructions,) = [k for k in counted if k.case == "scale_relu_add" and k.quantity == "smsp__inst_executed.sum"]
    assert instructions.verdict is Verdict.PASS and "not gated: its kernels changed (split: " in instructions.message
    launches = next(
        k
        for c in comp.cases
        for k in c.checks
        if k.check is CheckKind.GAIN and k.quantity == "launches" and k.verdict is Verdict.REGRESSED
    )
    assert launches.baseline_value == 3 and launches.current == 1.5 and launches.change == pytest.approx(-0.5)
    assert "fell from 3x to 1.5x (-50.0%)" in launches.message and "tolerance exact" in launches.message
    assert exit_code([comp]) == 1


def test_no_baseline_is_new_and_passes(clean, elementwise) -> None:
    comp = compare(clean, elementwise, None)
    gains = [k for c in comp.cases for k in c.checks if k.check is CheckKind.GAIN]
    assert gains and all(k.verdict is Verdict.NEW for k in gains)
    assert all(k.verdict is Verdict.PASS for c in comp.cases for k in c.checks if k.check is CheckKind.EXPECT)
    assert exit_code([comp]) == 0


def test_other_environment_is_incomparable_unless_accepted(clean, elementwise) -> None:
    other = replace(BASELINE, env={**BASELINE.env, "replay_mode": "application", "clock_control": "base"})
    comp = compare(clean, elementwise, other)
    assert not comp.comparable
    assert {d.field for d in comp.env_differences} == {"replay_mode", "clock_control"}
    gains = [k for c in comp.cases for k in c.checks if k.check is CheckKind.GAIN]
    assert all(k.verdict is Verdict.INCOMPARABLE for k in gains)
    assert all(k.message.endswith("not compared") for k in gains)  # the why is said once, in the note
    assert [n for n in comp.notes if "--accept-env clock_control,replay_mode" in n] == [comp.notes[0]]
    assert exit_code([comp]) == 3
    accepted = compare(clean, elementwise, other, accept_env=frozenset({"replay_mode", "clock_control"}))
    assert accepted.comparable and accepted.verdict is Verdict.PASS
    assert compare(clean, elementwise, other, accept_env=frozenset({"all"})).verdict is Verdict.PASS


def test_expectations_hold_without_comparable_baseline(regressed, elementwise) -> None:
    other = replace(BASELINE, env={**BASELINE.env, "gpu_name": "NVIDIA H100 80GB HBM3"})
    comp = compare(regressed, elementwise, other)
    assert exit_code([comp]) == 1  # the expectation still catches the split kernel


def test_improvement_beyond_tolerance(clean, elementwise) -> None:
    cases = dict(BASELINE.cases)
    sra = dict(cases["scale_relu_add"])
    values = dict(sra["fused"].values)
    values["dram__bytes.sum"] *= 1.2  # the baseline fused kernel moved more bytes
    sra["fused"] = replace(sra["fused"], values=values)
    cases["scale_relu_add"] = sra
    comp = compare(clean, elementwise, replace(BASELINE, cases=cases))
    v = _verdicts(comp)
    assert v[("scale_relu_add", "fused", "gain", "dram__bytes.sum")] is Verdict.IMPROVED
    assert exit_code([comp]) == 0


def test_wrong_result_fails_the_case(clean, elementwise) -> None:
    bad = CheckRecord("fused", "reference", 0, False, 12, 1000, 0.5, 0.1, 7, 1e-5, 1e-6)
    rec = clean.record
    cases = {**rec.cases, "bias_gelu": CaseRecord("bias_gelu", CaseStatus.WRONG, "wrong result", (bad,))}
    kernels = clean.kernels[clean.kernels.case != "bias_gelu"]
    comp = compare(summarize(kernels, replace(rec, cases=cases)), elementwise, BASELINE)
    checks = next(c for c in comp.cases if c.case == "bias_gelu").checks
    assert [(k.check.value, k.verdict) for k in checks] == [("correctness", Verdict.WRONG)]
    assert "12 of 1000 elements" in checks[0].message and "max abs err 0.5" in checks[0].message
    assert exit_code([comp]) == 1


def test_harness_error_and_unmeasured_variant_are_errors(clean, elementwise) -> None:
    rec = clean.record
    cases = {**rec.cases, "bias_gelu": CaseRecord("bias_gelu", CaseStatus.ERROR, "ValueError: boom at k.py:3")}
    kernels = clean.kernels[~((clean.kernels.case == "relu_bn_add_relu") & (clean.kernels.variant == "fused"))]
    kernels = kernels[kernels.case != "bias_gelu"]
    comp = compare(summarize(kernels, replace(rec, cases=cases)), elementwise, BASELINE)
    by_case = {c.case: c for c in comp.cases}
    assert by_case["bias_gelu"].verdict is Verdict.ERROR
    assert "boom" in by_case["bias_gelu"].checks[-1].message
    relu = by_case["relu_bn_add_relu"]
    assert relu.verdict is Verdict.ERROR
    assert any("launched no kernels inside their NVTX range" in k.message for k in relu.checks)
    assert exit_code([comp]) == 3


def test_case_only_in_baseline_is_missing(clean, elementwise) -> None:
    extra = replace(BASELINE, cases={**BASELINE.cases, "old_case": BASELINE.cases["bias_gelu"]})
    comp = compare(clean, elementwise, extra)
    missing = [c for c in comp.cases if c.case == "old_case"]
    assert missing and missing[0].verdict is Verdict.MISSING
    assert exit_code([comp]) == 0


def test_regression_wins_over_error(clean, regressed, elementwise) -> None:
    other = replace(BASELINE, env={**BASELINE.env, "clock_control": "base"})
    assert exit_code([compare(clean, elementwise, other)]) == 3
    assert exit_code([compare(clean, elementwise, other), compare(regressed, elementwise, BASELINE)]) == 1


def test_h200_baseline_is_never_silently_compared_with_an_h100_run(elementwise) -> None:
    h100 = _results(elementwise, CLEAN_REPORT.with_name("elementwise-h100.ncu-rep.xz"))
    comp = compare(h100, elementwise, BASELINE)
    assert [d.field for d in comp.env_differences] == ["gpu_name"]
    assert {k.verdict for c in comp.cases for k in c.checks if k.check is CheckKind.GAIN} == {Verdict.INCOMPARABLE}


def test_interrupted_run_names_each_cases_fate(clean, elementwise) -> None:
    """A run stopped part-way (a hang past the timeout): the record says which case was running."""
    rec = clean.record
    kept = {cid: c for cid, c in rec.cases.items() if cid in ("scale_relu_add", "bias_gelu")}
    stopped = replace(
        rec,
        cases=kept,
        complete=False,
        running="relu_bn_add_relu",
        interrupted="the profiled run did not finish within 45 s",
    )
    kernels = clean.kernels[clean.kernels.case != "bias_gelu"]  # bias_gelu was checked but its report is gone
    comp = compare(summarize(kernels, stopped), elementwise, BASELINE)
    by_case = {c.case: c for c in comp.cases}
    assert by_case["scale_relu_add"].verdict is Verdict.PASS
    assert "checked, not measured: the profiled run did not finish" in by_case["bias_gelu"].checks[-1].message
    assert "was running when the run stopped" in by_case["relu_bn_add_relu"].checks[-1].message
    assert by_case["add_mul"].checks[-1].message.startswith("not reached: ")
    assert exit_code([comp]) == 3
