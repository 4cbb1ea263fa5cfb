"""The quantity catalogue (fuseci/config/quantities.py): one entry per quantity, from which the ncu
command, the frames, the gates, the suite schema's enums and the reporters' labels derive."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from conftest import ELEMENTWISE, MINIMAL_SUITE, REPORTS, write

from fuseci.config import names, quantities, schema_enums
from fuseci.config.parse import SCHEMA_FILE, load_suite
from fuseci.config.policy import Direction, parse_tolerance
from fuseci.config.quantities import Aggregate, Gate, Quantity, Unit
from fuseci.errors import SuiteError
from fuseci.frames import metrics
from fuseci.frames.report import kernel_columns
from fuseci.judge.baseline import Baseline, VariantBaseline, from_results
from fuseci.judge.compare import compare
from fuseci.judge.verdict import CheckKind, Verdict
from fuseci.measure.record import read_record
from fuseci.reporters import console, html, markdown

#: A quantity of the kind the exact-counter gates add: L2 sectors written, counted exactly, on
#: every variant against the baseline's value of the same variant. Its source is a metric fuseci
#: already asks ncu for, so the recorded reports have it.
SECTORS = Quantity(
    names.L2_WRITE_SECTORS,
    "L2 sectors written",
    Unit.COUNT,
    Aggregate.SUM,
    sources=(names.L2_WRITE_SECTORS,),
    gate=Gate.VALUE,
    direction=Direction.LOWER_IS_BETTER,
    default="exact",
    unfused=True,
)


@pytest.fixture
def with_sectors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quantities, "QUANTITIES", (*quantities.QUANTITIES, SECTORS))


def test_the_committed_schema_holds_the_enums_the_catalogue_makes() -> None:
    text = SCHEMA_FILE.read_text(encoding="utf-8")
    assert schema_enums.text(schema_enums.derived(json.loads(text))) == text
    defs = json.loads(text)["definitions"]
    assert defs["gates"]["propertyNames"]["enum"] == list(quantities.gateable())
    assert defs["expect"]["propertyNames"]["enum"] == list(quantities.gains())


def test_each_quantity_is_declared_once_and_whole() -> None:
    entries = quantities.QUANTITIES
    assert len({q.name for q in entries}) == len(entries)
    for q in entries:
        assert (q.label and q.label != q.name) or q.name == names.LAUNCHES, q.name
        if q.default is not None:
            assert parse_tolerance(q.default).enabled, q.name
        if q.aggregate is Aggregate.DERIVED:
            assert q.name in metrics.DERIVED, f"{q.name} is derived but metrics.DERIVED does not compute it"
    # The constants code uses to treat a quantity specially name catalogue entries.
    for constant in (names.LAUNCHES, names.DRAM_BYTES, names.DURATION, names.EVENT_TIME, names.HOST_BLOCKING):
        assert quantities.get(constant) is not None
    assert quantities.default_gates() == {
        names.LAUNCHES: "exact",
        names.DRAM_BYTES: "1%",
        names.DURATION: "10%",
        names.EVENT_TIME: "10%",
        names.HOST_BLOCKING: "exact",
    }


def test_an_entry_that_cannot_work_is_refused_when_declared() -> None:
    with pytest.raises(ValueError, match="needs a source metric"):
        Quantity("x.sum", "x", Unit.COUNT, Aggregate.SUM)
    with pytest.raises(ValueError, match="cannot be gated"):
        Quantity("x", "x", Unit.COUNT, Aggregate.KERNEL, sources=("x",), gate=Gate.VALUE)
    with pytest.raises(ValueError, match="needs a gate"):
        Quantity("x", "x", Unit.COUNT, Aggregate.RECORD, default="exact")


def test_a_new_entry_reaches_the_schema_the_frames_the_gates_and_the_reports(with_sectors: None) -> None:
    # The schema's enums and the loader take it; ncu is asked for nothing new (its source is known).
    enums = schema_enums.enums()
    assert names.L2_WRITE_SECTORS in enums["gates"] and names.L2_WRITE_SECTORS in enums["caught_by"]
    assert names.L2_WRITE_SECTORS not in enums["expect"]  # no gain: expectations bound gains
    committed = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    derived = schema_enums.derived(committed)
    assert derived != committed  # the committed file is out of step until rewritten
    assert derived["definitions"]["gates"]["propertyNames"]["enum"] == enums["gates"]
    assert enums["gates"][-2:] == [names.L2_WRITE_SECTORS, names.HOST_BLOCKING]  # gains, values, rules
    assert quantities.ncu_metrics().count(names.L2_WRITE_SECTORS) == 1
    assert names.L2_WRITE_SECTORS in kernel_columns()
    suite = load_suite(ELEMENTWISE)
    assert all(str(c.gates[names.L2_WRITE_SECTORS]) == "exact" for c in suite.cases)  # its default gate

    # The variants frame has its column, summed over each variant's kernels.
    from fuseci.frames.report import read_report

    kernels = read_report(REPORTS / "elementwise.ncu-rep.xz")
    results = metrics.summarize(kernels, read_record(REPORTS / "elementwise.harness.json"))
    assert names.L2_WRITE_SECTORS in metrics.variant_columns()
    fused = results.variant_values("scale_relu_add", "fused")
    assert fused is not None
    expected = kernels[(kernels[names.CASE] == "scale_relu_add") & (kernels[names.VARIANT] == "fused")]
    assert fused[names.L2_WRITE_SECTORS] == expected[names.L2_WRITE_SECTORS].sum() > 0

    # Gated on every variant, unfused too, against the same variant's baseline: equal passes.
    baseline = from_results(results, {c.id for c in suite.cases})
    same = compare(results, suite, baseline)
    checked = [k for case in same.cases for k in case.checks if k.quantity == names.L2_WRITE_SECTORS]
    assert {k.variant for k in checked} >= {"unfused", "fused"}
    assert {k.check for k in checked} == {CheckKind.VALUE} and {k.verdict for k in checked} == {Verdict.PASS}

    # One sector more than the baseline's is a regression (exact, lower is better), one fewer an improvement.
    count = fused[names.L2_WRITE_SECTORS]
    for base, verdict, moved in ((count - 1, Verdict.REGRESSED, "rose"), (count + 1, Verdict.IMPROVED, "fell")):
        comparison = compare(results, suite, _moved(baseline, base))
        (k,) = [
            k
            for case in comparison.cases
            for k in case.checks
            if k.quantity == names.L2_WRITE_SECTORS and k.case == "scale_relu_add" and k.variant == "fused"
        ]
        assert k.verdict is verdict, k.message
        assert k.message.startswith(f"L2 sectors written of fused {moved} from {base:,.0f} to {count:,.0f}")

    # The reporters name it by its label and show it in its unit.
    regressed = compare(results, suite, _moved(baseline, count - 1))
    assert "L2 sectors written of fused rose" in console.render([regressed])
    assert "L2 sectors written of fused rose" in markdown.render([regressed])
    page = html.render([regressed])
    assert "<td>L2 sectors written</td>" in page and f">{count:,.0f}</td>" in page


def _moved(baseline: Baseline, sectors: float) -> Baseline:
    """``baseline`` with the fused scale_relu_add's L2 sectors set to ``sectors``."""
    entry = baseline.cases["scale_relu_add"]["fused"]
    moved = VariantBaseline(values={**entry.values, names.L2_WRITE_SECTORS: sectors}, kernels=entry.kernels)
    return replace(
        baseline, cases={**baseline.cases, "scale_relu_add": {**baseline.cases["scale_relu_add"], "fused": moved}}
    )


def test_the_loader_takes_a_new_gated_quantity_only_once_it_is_declared(tmp_path, monkeypatch) -> None:
    suite = write(tmp_path / "s.yaml", MINIMAL_SUITE + f"defaults: {{gates: {{{names.L2_WRITE_SECTORS}: 2%}}}}\n")
    with pytest.raises(SuiteError, match="cannot gate"):
        load_suite(suite)
    monkeypatch.setattr(quantities, "QUANTITIES", (*quantities.QUANTITIES, SECTORS))
    (case,) = load_suite(suite).cases
    assert str(case.gates[names.L2_WRITE_SECTORS]) == "±2%"


def test_the_suites_doc_lists_every_gain() -> None:
    import re

    from conftest import ROOT

    text = (ROOT / "docs" / "SUITES.md").read_text(encoding="utf-8")
    table = text.split("| quantity | gain means |", 1)[1].split("\n\n", 1)[0]
    listed = [n for row in table.splitlines()[2:] for n in re.findall(r"`([^`]+)`", row.split("|")[1])]
    assert sorted(listed) == sorted(quantities.gains())  # each once, none missing
