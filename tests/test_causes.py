"""The cause of each variant's finding (:func:`fuseci.judge.causes.decide`): each kind decided
from hand-made evidence and from the recorded reports against small changes of their baseline,
its precedence, a legacy baseline's note, and the cause said once per variant by every report."""

import json
from dataclasses import replace
from xml.etree import ElementTree

import pytest
from helpers import CLEAN_REPORT, H200_BASELINES, REGRESSED_REPORT, ROOT

from fuseci.api.running import case_sources
from fuseci.config import names
from fuseci.frames.inventory import KernelLaunch
from fuseci.judge import causes
from fuseci.judge.baseline import SourcePart, SourcePrint, VariantBaseline
from fuseci.judge.compare import compare
from fuseci.judge.verdict import CauseKind, CheckKind, Comparison, EnvDifference, MetricDelta, Verdict
from fuseci.measure import run as measure_run
from fuseci.measure.run import MeasureOptions
from fuseci.reporters import console, html, junit, markdown
from fuseci.store import baselines as bl
from fuseci.store import results as results_file

BASELINE = bl.load_baseline(H200_BASELINES / "nvidia-h200" / "elementwise.json")
PRINT = SourcePrint(
    (SourcePart("kernels/x.py", "IMPORT_TIME", "a"), SourcePart("kernels/x.py", "fused", "b", (12, 30)))
)
EDITED = SourcePrint((PRINT.parts[0], replace(PRINT.parts[1], digest="c", lines=(12, 33))))
OLD = (KernelLaunch("triton_poi_fused_add_gelu_0", 131072, 128, 30),)
RENAMED = (KernelLaunch("triton_poi_fused__to_copy_add_gelu_0", 131072, 128, 30),)
RESHAPED = (replace(OLD[0], block=256, registers=25),)
DRIVER = EnvDifference("driver_version", "580.65.06", "580.159.04", accepted=True)
TRITON = EnvDifference("triton_version", "3.5.0", "3.6.0", accepted=True)


def _finding(quantity: str = names.EVENT_TIME, change: float = -0.2, verdict: Verdict = Verdict.REGRESSED):
    check = CheckKind.GAIN if quantity in (names.EVENT_TIME, names.DURATION) else CheckKind.VALUE
    return MetricDelta("c", "compiled", check, quantity, verdict, "moved", change=change)


def _seen(**kw: object) -> causes.CauseEvidence:
    given = {
        "checks": (_finding(),),
        "kernels": OLD,
        "baseline_kernels": OLD,
        "spread": 0.01,
        "has_baseline": True,
        "source": PRINT,
        "baseline_source": PRINT,
        **kw,
    }
    return causes.CauseEvidence(**given)  # type: ignore[arg-type]


def test_a_variant_without_a_finding_has_no_cause() -> None:
    assert causes.decide(_seen(checks=(_finding(verdict=Verdict.PASS),))) is None
    assert causes.decide(_seen(checks=(_finding(verdict=Verdict.NEW),))) is None
    for verdict in (Verdict.WRONG, Verdict.REGRESSED, Verdict.IMPROVED, Verdict.WARN):
        assert causes.decide(_seen(checks=(_finding(verdict=verdict),))) is not None


def test_code_names_the_definitions_that_changed_with_their_lines() -> None:
    cause = causes.decide(_seen(source=EDITED, kernels=RENAMED, environment=(DRIVER,)))
    assert cause is not None and cause.kind is CauseKind.CODE
    assert cause.evidence == ("kernels/x.py:12-33 (fused) changed",)
    assert cause.also == ("driver 580.65.06 -> 580.159.04",)  # the environment named alongside
    added = SourcePrint((*PRINT.parts, SourcePart("kernels/y.cu", "", "d")))
    assert causes.source_changes(PRINT, added) == ["kernels/y.cu added"]
    assert causes.source_changes(added, PRINT) == ["kernels/y.cu removed"]


def test_compiler_names_what_differs_with_the_same_source() -> None:
    cause = causes.decide(_seen(kernels=RENAMED, environment=(TRITON, DRIVER)))
    assert cause is not None and cause.kind is CauseKind.COMPILER
    assert "its kernels were generated anew (replaced: triton_poi_fused_add_gelu_0" in cause.said()
    assert "Triton 3.5.0 -> 3.6.0" in cause.evidence and cause.also == ("driver 580.65.06 -> 580.159.04",)
    rebuilt = causes.decide(_seen(kernels=(replace(OLD[0], registers=40),)))  # registers alone: another build
    assert rebuilt is not None and rebuilt.kind is CauseKind.COMPILER, rebuilt


def test_autotune_is_the_same_kernels_in_another_configuration() -> None:
    tuned = causes.decide(_seen(kernels=RESHAPED, autotuned=("triton_poi_fused_add_gelu_0: autotuned",)))
    assert tuned is not None and tuned.kind is CauseKind.AUTOTUNE
    assert "block 128 -> 256, registers 30 -> 25" in tuned.said() and "autotuned at its first call" in tuned.said()
    cached = causes.decide(_seen(kernels=(replace(OLD[0], grid=3328, block=256),)))
    assert cached is not None and cached.kind is CauseKind.AUTOTUNE and "compile cache" in cached.said()


def test_environment_is_the_same_kernels_on_another_driver() -> None:
    cause = causes.decide(_seen(checks=(_finding(names.DRAM_BYTES),), environment=(DRIVER,)))
    assert cause is not None and cause.kind is CauseKind.ENVIRONMENT
    assert cause.evidence == ("the same source and kernels", "driver 580.65.06 -> 580.159.04")


def test_measurement_is_a_time_within_its_own_spread_never_a_counter() -> None:
    noise = causes.decide(_seen(checks=(_finding(change=-0.12),), spread=0.2))
    assert noise is not None and noise.kind is CauseKind.MEASUREMENT and "within its own spread" in noise.said()
    beyond = causes.decide(_seen(checks=(_finding(change=-0.3),), spread=0.2))
    assert beyond is not None and beyond.kind is CauseKind.UNDETERMINED and beyond.missing
    counted = causes.decide(_seen(checks=(_finding(names.GLOBAL_LOAD_BYTES, change=-0.01),), spread=0.2))
    assert counted is not None and counted.kind is CauseKind.UNDETERMINED  # exact counters are never noise


def test_precedence_code_then_compiler_then_autotune_then_environment_then_measurement() -> None:
    noisy = (_finding(change=-0.12),)
    order = [
        (dict(source=EDITED, kernels=RESHAPED, environment=(TRITON,)), CauseKind.CODE),
        (dict(kernels=RESHAPED, environment=(TRITON,)), CauseKind.COMPILER),  # an upgrade may reshape too
        (dict(kernels=RESHAPED, environment=(DRIVER,)), CauseKind.AUTOTUNE),
        (dict(environment=(DRIVER,)), CauseKind.ENVIRONMENT),
        ({}, CauseKind.MEASUREMENT),
    ]
    for given, kind in order:
        cause = causes.decide(_seen(checks=noisy, spread=0.2, **given))
        assert cause is not None and cause.kind is kind, (given, cause)


def test_undetermined_says_what_is_missing_never_a_guess() -> None:
    legacy = causes.decide(_seen(baseline_source=None, kernels=RENAMED))
    assert legacy is not None and legacy.kind is CauseKind.UNDETERMINED
    assert legacy.evidence[0].startswith("its kernels changed") and "record the baseline again" in legacy.missing
    unproven = causes.decide(_seen(source=replace(PRINT, unproven=("m.py:3 open(name)",)), kernels=RESHAPED))
    assert unproven is not None and unproven.kind is CauseKind.UNDETERMINED and "m.py:3 open(name)" in unproven.missing
    nothing = causes.decide(_seen(has_baseline=False))
    assert nothing is not None and nothing.kind is CauseKind.UNDETERMINED


# --- from the recorded reports ---------------------------------------------------------------


@pytest.fixture(scope="module")
def regressed(elementwise):
    return measure_run.measure(elementwise, MeasureOptions(from_report=REGRESSED_REPORT))


@pytest.fixture(scope="module")
def clean(elementwise):
    return measure_run.measure(elementwise, MeasureOptions(from_report=CLEAN_REPORT))


@pytest.fixture(scope="module")
def prints(elementwise):  # type: ignore[no-untyped-def]
    got = case_sources(elementwise, ROOT)
    assert got is not None
    return got


def _cause(comp: Comparison, case: str = "scale_relu_add", variant: str = "fused"):  # type: ignore[no-untyped-def]
    return next(v.cause for c in comp.cases for v in c.variants if (c.case, v.variant) == (case, variant))


def _verdicts(comp: Comparison) -> list[tuple[str, str, str, Verdict]]:
    return [(k.case, k.variant, k.quantity, k.verdict) for c in comp.cases for k in c.checks]


def test_the_fingerprint_names_each_definition_with_its_lines(prints) -> None:  # type: ignore[no-untyped-def]
    said = [p.said() for p in prints["scale_relu_add"].parts]
    assert "kernels/elementwise.py (import-time code)" in said
    assert any(s.startswith("kernels/elementwise.py:") and s.endswith("(scale_relu_add_fused)") for s in said), said
    assert prints["scale_relu_add"] != prints["bias_gelu"]


def test_a_legacy_baseline_is_judged_as_before_with_one_note(regressed, elementwise, prints) -> None:  # type: ignore[no-untyped-def]
    before = compare(regressed, elementwise, BASELINE)
    comp = compare(regressed, elementwise, BASELINE, sources=prints)
    assert _verdicts(comp) == _verdicts(before)
    cause = _cause(comp)
    assert cause is not None and cause.kind is CauseKind.UNDETERMINED and "record the baseline again" in cause.missing
    assert sum("causes need a re-recorded baseline" in n for n in comp.notes) == 1


def test_code_from_a_fingerprint_that_differs(regressed, elementwise, prints) -> None:  # type: ignore[no-untyped-def]
    old = prints["scale_relu_add"]
    edited = SourcePrint(
        tuple(replace(p, digest="0" * 64) if p.name == "scale_relu_add_fused" else p for p in old.parts)
    )
    comp = compare(
        regressed, elementwise, replace(BASELINE, sources={**prints, "scale_relu_add": edited}), sources=prints
    )
    cause = _cause(comp)
    assert cause is not None and cause.kind is CauseKind.CODE, cause
    (line,) = cause.evidence
    assert line.startswith("kernels/elementwise.py:") and line.endswith("(scale_relu_add_fused) changed")
    assert not any("causes need" in n for n in comp.notes)


def test_a_benign_edit_is_code_with_nothing_regressed(clean, elementwise, prints) -> None:  # type: ignore[no-untyped-def]
    """An edit of a case's source that moved nothing fuseci checks: every variant of that case
    passes, with the edit as its cause; the other cases have none."""
    old = prints["bias_gelu"]
    edited = SourcePrint(tuple(replace(p, digest="0" * 64) if p.name == "bias_gelu_fused" else p for p in old.parts))
    same = compare(clean, elementwise, replace(BASELINE, sources=prints), sources=prints)
    comp = compare(clean, elementwise, replace(BASELINE, sources={**prints, "bias_gelu": edited}), sources=prints)
    assert _verdicts(comp) == _verdicts(same) and comp.verdict is same.verdict is Verdict.PASS
    caused = {(c.case, v.variant): v.cause for c in comp.cases for v in c.variants if v.cause is not None}
    assert {case for case, _ in caused} == {"bias_gelu"}, caused
    for cause in caused.values():
        assert cause.kind is CauseKind.CODE
        (line,) = cause.evidence
        assert line.startswith("kernels/elementwise.py:") and line.endswith("(bias_gelu_fused) changed")
    assert not any(v.cause for c in same.cases for v in c.variants)


def test_compiler_from_the_same_fingerprint_and_other_kernels(regressed, elementwise, prints) -> None:  # type: ignore[no-untyped-def]
    comp = compare(regressed, elementwise, replace(BASELINE, sources=prints), sources=prints)
    cause = _cause(comp)
    assert cause is not None and cause.kind is CauseKind.COMPILER
    assert "generated anew (split: fuseci_scale_relu_add became" in cause.said()
    assert [(c.case, v.variant) for c in comp.cases for v in c.variants if v.cause] == [("scale_relu_add", "fused")]


def _dearer(fused: VariantBaseline) -> VariantBaseline:
    """The baseline's fused variant with 10% fewer DRAM bytes: now its bytes gain regressed."""
    return replace(fused, values={**fused.values, names.DRAM_BYTES: fused.values[names.DRAM_BYTES] * 0.9})


def test_environment_from_a_driver_set_back(clean, elementwise, prints) -> None:  # type: ignore[no-untyped-def]
    case = BASELINE.cases["bias_gelu"]
    cases = {**BASELINE.cases, "bias_gelu": {**case, "fused": _dearer(case["fused"])}}
    same = replace(BASELINE, cases=cases, sources=prints)
    assert _cause(compare(clean, elementwise, same, sources=prints), "bias_gelu").kind is CauseKind.UNDETERMINED
    older = replace(same, env={**BASELINE.env, "driver_version": "580.65.06"})
    comp = compare(clean, elementwise, older, sources=prints)
    cause = _cause(comp, "bias_gelu")
    assert cause is not None and cause.kind is CauseKind.ENVIRONMENT
    assert f"driver 580.65.06 -> {clean.env['driver_version']}" in cause.evidence


def test_autotune_from_a_launch_shape_set_back(clean, elementwise, prints) -> None:  # type: ignore[no-untyped-def]
    case = BASELINE.cases["bias_gelu"]
    fused = _dearer(case["fused"])
    fused = replace(fused, kernels=tuple(replace(k, grid=k.grid * 2) for k in fused.kernels))
    cases = {**BASELINE.cases, "bias_gelu": {**case, "fused": fused}}
    cause = _cause(
        compare(clean, elementwise, replace(BASELINE, cases=cases, sources=prints), sources=prints), "bias_gelu"
    )
    assert cause is not None and cause.kind is CauseKind.AUTOTUNE and "compile cache" in cause.said(), cause


def test_measurement_from_a_time_within_the_baselines_spread(clean, elementwise, prints) -> None:  # type: ignore[no-untyped-def]
    case = BASELINE.cases["bias_gelu"]
    fused = case["fused"]
    time = fused.values[names.EVENT_TIME]
    wide = replace(fused, values={**fused.values, names.EVENT_TIME: time * 1.3, names.EVENT_TIME_IQR: time * 0.5})
    cases = {**BASELINE.cases, "bias_gelu": {**case, "fused": wide}}
    comp = compare(clean, elementwise, replace(BASELINE, cases=cases, sources=prints), sources=prints)
    moved = [
        k
        for c in comp.cases
        for k in c.checks
        if c.case == "bias_gelu" and k.variant == "fused" and k.verdict is not Verdict.PASS
    ]
    assert [k.quantity for k in moved] == [names.EVENT_TIME], moved
    cause = _cause(comp, "bias_gelu")
    assert cause is not None and cause.kind is CauseKind.MEASUREMENT, cause


# --- said once per variant -------------------------------------------------------------------


@pytest.fixture(scope="module")
def judged(regressed, elementwise, prints) -> Comparison:  # type: ignore[no-untyped-def]
    return compare(regressed, elementwise, BASELINE, sources=prints)


def test_the_console_says_the_cause_once_right_under_the_verdict(judged) -> None:  # type: ignore[no-untyped-def]
    lines = console.render([judged]).splitlines()
    head = next(
        i for i, line in enumerate(lines) if line.lstrip().startswith("REGRESSED") and "scale_relu_add/fused" in line
    )
    assert lines[head + 1].startswith("    cause: undetermined: its kernels changed (split: fuseci_scale_relu_add")
    block = lines[head : lines.index("", head)]
    assert sum("cause:" in line for line in block) == 1
    assert sum("fuseci_mutant_scale_relu + fuseci_mutant_add" in line for line in block) == 2  # cause, inventory


def test_markdown_says_the_cause_once(judged) -> None:  # type: ignore[no-untyped-def]
    text = markdown.render([judged])
    assert text.count("*cause: undetermined:") == 1


def test_junit_says_the_cause_whole_once_and_points_to_it(judged) -> None:  # type: ignore[no-untyped-def]
    xml = ElementTree.fromstring(junit.render([judged]))
    bodies = [f.text or "" for f in xml.iter("failure")]
    whole = [b for b in bodies if "cause: undetermined: its kernels changed" in b]
    pointers = [b for b in bodies if "cause: undetermined (said in scale_relu_add.fused." in b]
    assert len(whole) == 1 and len(pointers) == len(bodies) - 1 > 0


def test_html_says_the_cause_once(judged) -> None:  # type: ignore[no-untyped-def]
    page = html.render([judged])
    assert page.count('class="cause" data-variant="fused" data-cause="undetermined"') == 1


def test_the_results_file_holds_the_cause_as_a_field(judged, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "r.json"
    path.write_text(results_file.dumps([judged]))
    doc = json.loads(path.read_text())
    (stored,) = [v["cause"] for c in doc["suites"][0]["cases"] for v in c["variants"] if "cause" in v]
    assert stored["kind"] == "undetermined" and stored["evidence"] and stored["missing"]
    (back,) = results_file.read_results(path)
    assert _cause(back) == _cause(judged)
    del doc["suites"][0]["cases"][0]["variants"][1]["cause"]  # a file written before: no cause
    path.write_text(json.dumps(doc))
    assert _cause(results_file.read_results(path)[0]) is None
