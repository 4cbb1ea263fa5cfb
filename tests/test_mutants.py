"""The planted regressions of suites/mutants.yaml, recorded on an H200: each is caught by the
check meant to catch it, the healthy fused kernel beside them passes, and a check that stops
catching its mutant turns the planted verdict into a failure."""

from dataclasses import replace

import pytest
from helpers import H200_BASELINES, REPORTS, SUITES

from fuseci.config.parse import load_suite
from fuseci.config.policy import parse_tolerance
from fuseci.judge.compare import compare
from fuseci.judge.verdict import CheckKind, Verdict, exit_code
from fuseci.measure import run as measure_run
from fuseci.measure.run import MeasureOptions
from fuseci.store import baselines as bl

REPORT = REPORTS / "mutants.ncu-rep.xz"

#: What each mutant breaks, and the checks that must catch it (as the suite says).
INTENDED = {
    ("scale_relu_add", "defused"): {("gain", "launches"), ("inventory", "kernels")},
    ("scale_relu_add", "rereads"): {("gain", "dram__bytes.sum"), ("bytes", "dram_bytes_over_min")},
    ("scale_relu_add", "extra_launch"): {("gain", "launches"), ("inventory", "kernels")},
    ("scale_relu_add", "register_heavy"): {("value", "sm__maximum_warps_per_active_cycle_pct")},
    ("scale_relu_add", "strided"): {
        ("gain", "dram__bytes.sum"),
        ("bytes", "dram_bytes_over_min"),
        ("gain", "event_time"),
    },
    ("scale_relu_add", "host_sync"): {("asynchrony", "host_blocking")},
    ("wrong_result", "fused"): {("correctness", "reference.output0"), ("correctness", "unfused.output0")},
    # source edits of the CUDA kernel (kernels/edits.py): caught by the bytes they ask of memory
    ("bias_gelu", "sector"): {("value", "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum")},
    ("bias_gelu", "halo"): {("value", "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum")},
    ("bias_gelu", "store"): {("value", "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum")},
}


@pytest.fixture(scope="module")
def suite():
    return load_suite(SUITES / "mutants.yaml")


@pytest.fixture(scope="module")
def results(suite):
    return measure_run.measure(suite, MeasureOptions(from_report=REPORT))


@pytest.fixture(scope="module")
def baseline():
    return bl.load_baseline(H200_BASELINES / "nvidia-h200" / "mutants.json")


def _unplanted(suite):
    """The suite with every caught_by removed: the raw verdicts of the checks."""
    cases = tuple(replace(c, variants=tuple(replace(v, caught_by=()) for v in c.variants)) for c in suite.cases)
    return replace(suite, cases=cases)


def test_every_mutant_fails_the_checks_meant_to_catch_it(suite, results, baseline) -> None:
    raw = compare(results, _unplanted(suite), baseline)
    failed = {}
    for case in raw.cases:
        for k in case.checks:
            if k.verdict in (Verdict.REGRESSED, Verdict.WRONG):
                failed.setdefault((k.case, k.variant), set()).add((k.check.value, k.quantity))
    for planted, checks in INTENDED.items():
        assert checks <= failed.get(planted, set()), (planted, failed.get(planted))
    # The healthy kernels beside them, and the benign edits (the same bytes), pass everything.
    for healthy in ("fused", "unfused"):
        assert ("scale_relu_add", healthy) not in failed and ("bias_gelu", healthy) not in failed
    assert ("bias_gelu", "unrolled") not in failed and ("bias_gelu", "block") not in failed
    assert exit_code([raw]) == 1


def test_the_checks_say_what_broke(suite, results, baseline) -> None:
    raw = compare(results, _unplanted(suite), baseline)
    msg = {(k.variant, k.check.value, k.quantity): k.message for c in raw.cases for k in c.checks}
    assert (
        "the fusion split: fuseci_scale_relu_add became fuseci_mutant_scale_relu + fuseci_mutant_add"
        in (msg[("defused", "inventory", "kernels")])
    )
    assert "new kernel: fuseci_mutant_status" in msg[("extra_launch", "inventory", "kernels")]
    assert "registers 32 -> 64" in msg[("register_heavy", "inventory", "kernels")]
    assert "fell from 100.0% to 50.0%" in msg[("register_heavy", "value", "sm__maximum_warps_per_active_cycle_pct")]
    assert "rereads moved 1.3" in msg[("rereads", "bytes", "dram_bytes_over_min")]
    assert "it re-reads an input or spills an intermediate" in msg[("rereads", "bytes", "dram_bytes_over_min")]
    assert "strided moved 10." in msg[("strided", "bytes", "dram_bytes_over_min")]


def test_planted_suite_passes_when_every_mutant_is_caught(suite, results, baseline) -> None:
    comp = compare(results, suite, baseline)
    planted = {(k.case, k.variant): k for c in comp.cases for k in c.checks if k.check is CheckKind.PLANTED}
    assert set(planted) == set(INTENDED)
    assert all(k.verdict is Verdict.PASS for k in planted.values())
    # register_heavy also keeps under half the warps busy: a warning, never a failure.
    assert comp.verdict in (Verdict.PASS, Verdict.WARN) and exit_code([comp]) == 0


def test_a_check_that_stops_catching_its_mutant_fails_the_run(suite, results, baseline) -> None:
    """With the bytes allowance off, nothing catches `bytes` for rereads and strided any more."""
    blind = replace(suite, cases=tuple(replace(c, bytes_allowance=parse_tolerance("off")) for c in suite.cases))
    comp = compare(results, blind, baseline)
    planted = {k.variant: k for c in comp.cases for k in c.checks if k.check is CheckKind.PLANTED}
    assert planted["rereads"].verdict is Verdict.REGRESSED
    assert "NOT caught by bytes" in planted["rereads"].message
    assert planted["defused"].verdict is Verdict.PASS
    assert exit_code([comp]) == 1


def test_caught_mutants_read_as_caught_in_the_console_and_markdown(suite, results, baseline) -> None:
    from fuseci.reporters import console, markdown

    comp = compare(results, suite, baseline)
    totals = "fuseci: 10 planted regressions caught; 7 variants pass: 65 checks; exit 0"
    text, doc = console.render([comp]), markdown.render([comp])
    assert text.endswith(totals + "\n") and doc.startswith(f"**{totals}**\n")
    for case, variant in INTENDED:
        assert f"CAUGHT     {case}/{variant}  " in text
        assert f"| {case} | {variant} | " in doc.split("<details>")[0]  # shown, not collapsed
        assert f"- 🎯 **CAUGHT** {case}/{variant}" in doc
    assert "    - planted regression caught by launches, inventory" in text


def test_a_mutant_that_got_through_counts_as_one_regressed_variant(suite, results, baseline) -> None:
    from fuseci.reporters.text import totals

    blind = replace(suite, cases=tuple(replace(c, bytes_allowance=parse_tolerance("off")) for c in suite.cases))
    line = totals([compare(results, blind, baseline)])
    assert line.startswith("fuseci: 2 variants regressed: 2 checks; 8 planted regressions caught; ")


def test_run_without_suites_skips_the_planted_suite(in_root, monkeypatch) -> None:
    from fuseci.api import load_suites as _load_suites

    names = {s.name for s in _load_suites(None)}
    assert "mutants" not in names and "elementwise" in names


def test_a_caught_plant_with_structural_notes_reads_caught(tmp_path) -> None:
    """`fuseci run suites/model_mutants.yaml` on an H100 80GB HBM3 (its JSON results): each of
    the five plants its ledger caught also left structural notes (renamed kernels, another graph,
    a new graph break), which are warnings. They are counted and shown as caught, the notes
    under them; the benign graph break stays a warning."""
    import lzma

    from fuseci.reporters import console, markdown
    from fuseci.store.results import read_results

    path = tmp_path / "results.json"
    path.write_bytes(lzma.decompress((REPORTS.parent / "results" / "h100-model-mutants.json.xz").read_bytes()))
    comps = read_results(path)
    text, doc = console.render(comps), markdown.render(comps)
    totals = (
        "fuseci: 1 variant with warnings: 3 checks; 1 variant improved: 1 check; 5 planted regressions caught; "
        "5 variants pass: 23 checks; exit 0"
    )
    assert text.endswith(totals + "\n") and doc.startswith(f"**{totals}**\n")
    plants = ("prenorm/break_add_norm", "prenorm/contiguous", "prenorm/opaque", "swiglu/fp32", "convbn/opaque")
    for plant in plants:
        block = text.split(f"  CAUGHT     {plant}  ")[1]
        assert block.startswith("suites/model_mutants.yaml:") and "    - planted regression caught by ledger\n" in block
        assert f"- 🎯 **CAUGHT** {plant}\n  - planted regression caught by ledger\n" in doc
        # once, as caught: not again among the warnings
        assert text.count(f"CAUGHT     {plant}  ") == 1 and f"WARN       {plant}  " not in text
    assert "2 compiled graph(s), was 1" in text.split("CAUGHT     prenorm/break_add_norm")[1].split("CAUGHT")[0]
    assert "  WARN       prenorm/free_break  " in text and "| prenorm | free_break |" in doc
