"""The planted regressions of suites/pytorch_mutants.yaml, recorded on an H200 (torch 2.11,
Triton 3.6): a graph break, a silent fallback to eager and a compile inside the measured range,
each caught by the check meant to catch it, and the first two already without a baseline; the
PyTorch suite's own report judged right."""

from dataclasses import replace

import pytest
from helpers import H200_BASELINES, REPORTS, SUITES

from fuseci.config.parse import load_suite
from fuseci.judge.compare import compare
from fuseci.judge.verdict import CheckKind, Verdict, exit_code
from fuseci.measure import run as measure_run
from fuseci.measure.run import MeasureOptions
from fuseci.store import baselines as bl

REPORT = REPORTS / "pytorch_mutants.ncu-rep.xz"

#: What each mutant breaks, and the checks that must catch it (as the suite says).
INTENDED = {
    "graph_break": {("kernels", "kernels"), ("gain", "launches"), ("gain", "dram__bytes.sum")},
    "fallback": {("kernels", "kernels"), ("gain", "launches")},
    "recompiles": {("compile", "")},
    # source edits of the Triton kernel (kernels/edits.py): caught by the bytes they ask of memory
    "triton_sector": {("value", "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum")},
    "triton_halo": {("value", "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum")},
    "triton_store": {("value", "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum")},
}


@pytest.fixture(scope="module")
def suite():
    return load_suite(SUITES / "pytorch_mutants.yaml")


@pytest.fixture(scope="module")
def results(suite):
    return measure_run.measure(suite, MeasureOptions(from_report=REPORT))


@pytest.fixture(scope="module")
def baseline():
    return bl.load_baseline(H200_BASELINES / "nvidia-h200" / "pytorch_mutants.json")


def _unplanted(suite):
    cases = tuple(replace(c, variants=tuple(replace(v, caught_by=()) for v in c.variants)) for c in suite.cases)
    return replace(suite, cases=cases)


def _failed(comparison) -> dict[str, set[tuple[str, str]]]:
    failed: dict[str, set[tuple[str, str]]] = {}
    for case in comparison.cases:
        for k in case.checks:
            if k.verdict in (Verdict.REGRESSED, Verdict.WRONG, Verdict.ERROR):
                failed.setdefault(k.variant, set()).add((k.check.value, k.quantity))
    return failed


def test_every_mutant_fails_the_checks_meant_to_catch_it(suite, results, baseline) -> None:
    failed = _failed(compare(results, _unplanted(suite), baseline))
    for variant, checks in INTENDED.items():
        assert checks <= failed.get(variant, set()), (variant, failed.get(variant))
    # the healthy ones pass, and the benign edits (the same bytes) too
    assert not {"compiled", "unfused", "triton", "triton_warps", "triton_block"} & set(failed)


def test_a_graph_break_and_a_fallback_are_caught_without_a_baseline(suite, results) -> None:
    failed = _failed(compare(results, _unplanted(suite), None))
    assert ("kernels", "kernels") in failed["graph_break"] and ("kernels", "kernels") in failed["fallback"]
    assert failed["recompiles"] == {("compile", "")}
    assert "compiled" not in failed


def test_the_checks_say_what_broke(suite, results, baseline) -> None:
    raw = compare(results, _unplanted(suite), baseline)
    msg = {(k.variant, k.check.value): k.message for c in raw.cases for k in c.checks}
    split = msg[("graph_break", "kernels")]
    assert "graph_break launched 2 kernels: triton_" in split and "exactly 1 matching 'triton_.*' declared, 2:" in split
    eager = msg[("fallback", "kernels")]
    assert "fallback launched 3 kernels" in eager and "declared, none" in eager and "fell back to eager" in eager
    compiled = msg[("recompiles", "compile")]
    assert compiled.startswith(
        "recompiles compiled inside its measured range (Triton compiled bias_gelu_residual_salted_kernel)"
    )


def test_the_planted_suite_passes_when_every_mutant_is_caught(suite, results, baseline) -> None:
    comp = compare(results, suite, baseline)
    planted = {k.variant: k for c in comp.cases for k in c.checks if k.check is CheckKind.PLANTED}
    assert set(planted) == set(INTENDED)
    assert all(k.verdict is Verdict.PASS for k in planted.values()), {v: k.message for v, k in planted.items()}
    assert exit_code([comp]) == 0


def test_the_pytorch_suite_records_its_frameworks_and_first_calls() -> None:
    suite = load_suite(SUITES / "pytorch.yaml")
    results = measure_run.measure(suite, MeasureOptions(from_report=REPORTS / "pytorch.ncu-rep.xz"))
    env = results.record.env
    assert env["torch_version"].startswith("2.") and env["triton_version"].startswith("3.")
    comp = compare(results, suite, bl.load_baseline(H200_BASELINES / "nvidia-h200" / "pytorch.json"))
    assert exit_code([comp]) == 0
    kernels = {(k.case, k.variant): k for c in comp.cases for k in c.checks if k.check is CheckKind.KERNELS}
    assert {v for _, v in kernels} == {"compiled", "triton"} and all(
        k.verdict is Verdict.PASS for k in kernels.values()
    )
    for case in suite.cases:
        first = results.record.cases[case.id].first_call_ns
        assert set(first) == {v.id for v in case.variants} and all(ns > 0 for ns in first.values())
