"""The compiled code as a cause's evidence (fuseci.judge.causes.evidence): summaries of the SASS recorded
in tests/data/sass put on the recorded reports' kernels, diffed against a baseline's, named in the
cause, kept by the baseline, and a note for a kernel whose code could not be read."""

from __future__ import annotations

import json
import lzma
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import CLEAN_REPORT, H200_BASELINES, REGRESSED_REPORT

from fuseci.errors import BaselineError
from fuseci.frames.inventory import KernelLaunch
from fuseci.judge import causes
from fuseci.judge.baseline import SourcePart, SourcePrint, code_of, from_results, normalized
from fuseci.judge.compare import compare
from fuseci.judge.verdict import CauseKind, CheckKind, MetricDelta, Verdict
from fuseci.measure import run as measure_run
from fuseci.measure.run import MeasureOptions
from fuseci.records import sass
from fuseci.store import baselines as bl

SASS = Path(__file__).parent / "data" / "sass"
BASELINE = bl.load_baseline(H200_BASELINES / "nvidia-h200" / "elementwise.json")
KERNEL = "fuseci_scale_relu_add"


def code(name: str) -> sass.KernelCode:
    (summary,) = sass.summarize(lzma.decompress((SASS / f"{name}.sass.xz").read_bytes()).decode()).values()
    return summary


VECTOR, SCALAR = code("scale_relu_add"), code("scale_relu_add_scalar")
LAUNCH = (KernelLaunch(KERNEL, 1056, 256, 32),)


def test_evidence_names_each_kernel_whose_code_differs() -> None:
    changes, notes = causes.evidence(LAUNCH, {KERNEL: (SCALAR,)}, {KERNEL: VECTOR}, {})
    assert changes == (f"{KERNEL}: LDG.E.128 ×10 → none; STG.E.128 ×5 → none; instructions 264 → 120",)
    assert notes == ()
    assert causes.evidence(LAUNCH, {KERNEL: (VECTOR,)}, {KERNEL: VECTOR}, {}) == ((), ())
    assert causes.evidence(LAUNCH, {}, {KERNEL: VECTOR}, {}) == ((), ())  # nothing now: nothing said


def test_a_kernel_that_could_not_be_disassembled_is_a_note() -> None:
    _, notes = causes.evidence(LAUNCH, {}, {KERNEL: VECTOR}, {KERNEL: "x_2.cubin could not be disassembled: ..."})
    assert notes == (f"{KERNEL}: compiled code not compared (x_2.cubin could not be disassembled: ...)",)


def test_the_build_launched_is_told_by_its_registers() -> None:
    wide = replace(VECTOR, registers=40)
    assert code_of(LAUNCH, {KERNEL: (wide, SCALAR)}) == {KERNEL: SCALAR}
    assert code_of(LAUNCH, {KERNEL: (wide, replace(SCALAR, registers=48))}) == {}


def test_many_kernels_are_counted_not_listed() -> None:
    launches = tuple(KernelLaunch(f"k{i}", 1, 1, 32) for i in range(12))
    changes, _ = causes.evidence(
        launches, {k.name: (SCALAR,) for k in launches}, {k.name: VECTOR for k in launches}, {}
    )
    assert len(changes) == causes.MAX_KERNELS and changes[-1] == "5 more kernels' code changed too"


def _finding() -> MetricDelta:
    return MetricDelta("c", "fused", CheckKind.GAIN, "dram__bytes.sum", Verdict.REGRESSED, "moved", change=-0.2)


def test_the_same_kernels_in_other_code_are_the_compiler() -> None:
    changes, _ = causes.evidence(LAUNCH, {KERNEL: (SCALAR,)}, {KERNEL: VECTOR}, {})
    seen = causes.CauseEvidence(
        checks=(_finding(),),
        kernels=LAUNCH,
        baseline_kernels=LAUNCH,
        spread=0.01,
        has_baseline=True,
        source=None,
        baseline_source=None,
        code_changes=changes,
    )
    legacy = causes.decide(seen)  # no source fingerprint: what was seen, undetermined
    assert legacy is not None and legacy.kind is CauseKind.UNDETERMINED and changes[0] in legacy.evidence
    same = SourcePrint((SourcePart("kernels/elementwise.py", "f", "a", (1, 2)),))
    cause = causes.decide(replace(seen, source=same, baseline_source=same))
    assert cause is not None and cause.kind is CauseKind.COMPILER
    assert cause.evidence == (
        "the case's source is as at the baseline",
        "its kernels were built anew",
        f"{KERNEL}: LDG.E.128 ×10 → none; STG.E.128 ×5 → none; instructions 264 → 120",
    )
    edited = SourcePrint((replace(same.parts[0], digest="b"),))
    code_change = causes.decide(replace(seen, source=edited, baseline_source=same))
    assert code_change is not None and code_change.kind is CauseKind.CODE and changes[0] in code_change.evidence
    without = causes.decide(replace(seen, source=same, baseline_source=same, code_changes=()))
    assert without is not None and without.kind is CauseKind.UNDETERMINED  # nothing else differs


@pytest.fixture(scope="module")
def clean(elementwise):  # type: ignore[no-untyped-def]
    return measure_run.measure(elementwise, MeasureOptions(from_report=CLEAN_REPORT))


@pytest.fixture(scope="module")
def regressed(elementwise):  # type: ignore[no-untyped-def]
    return measure_run.measure(elementwise, MeasureOptions(from_report=REGRESSED_REPORT))


def test_a_baseline_keeps_each_cases_code_and_reads_it_back(clean, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    record = replace(clean.record, code={KERNEL: (replace(VECTOR, registers=32),), "elsewhere": (SCALAR,)})
    baseline = normalized(from_results(replace(clean, record=record), set(clean.record.cases)))
    assert baseline.code == {"scale_relu_add": {KERNEL: VECTOR}}
    bl.save_baseline(baseline, tmp_path / "b.json")
    assert bl.load_baseline(tmp_path / "b.json") == baseline
    doc = json.loads((tmp_path / "b.json").read_text())
    assert doc["code"]["scale_relu_add"][KERNEL]["ops"]["LDG.E.128"] == 10
    assert "code" not in json.loads(bl.dumps(BASELINE))  # a legacy baseline reads and writes as it was
    for bad in ({"scale_relu_add": {KERNEL: {"registers": "32"}}}, {"scale_relu_add": [1]}, {"a b": {}}):
        (tmp_path / "bad.json").write_text(json.dumps({**doc, "code": bad}))
        with pytest.raises(BaselineError, match="code"):
            bl.load_baseline(tmp_path / "bad.json")


def test_a_kernel_not_disassembled_is_named_in_the_cause(regressed, elementwise) -> None:  # type: ignore[no-untyped-def]
    notes = {"fuseci_mutant_add": "0a_2.cubin could not be disassembled: not a cubin (PTX, or a cut file)"}
    comp = compare(replace(regressed, record=replace(regressed.record, code_notes=notes)), elementwise, BASELINE)
    cause = next(v.cause for c in comp.cases for v in c.variants if (c.case, v.variant) == ("scale_relu_add", "fused"))
    assert cause is not None
    assert "fuseci_mutant_add: compiled code not compared (0a_2.cubin could not be disassembled" in cause.said()
