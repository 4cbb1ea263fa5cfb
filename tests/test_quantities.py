"""The quantity catalogue (fuseci/config/quantities.py): one entry per quantity, from which the ncu
command, the frames, the gates, the suite schema's enums and the reporters' labels derive."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from helpers import ELEMENTWISE, MINIMAL_SUITE, REPORTS, write

from fuseci.config import names, quantities, schema
from fuseci.config.model import CHECK_NAMES
from fuseci.config.parse import SCHEMA_FILE, load_suite
from fuseci.config.policy import Direction, parse_tolerance
from fuseci.config.quantities import Aggregate, Counted, Gate, Quantity, Unit
from fuseci.errors import SuiteError
from fuseci.frames import metrics
from fuseci.frames.report import kernel_columns, read_report
from fuseci.judge.baseline import Baseline, VariantBaseline, from_results
from fuseci.judge.compare import compare
from fuseci.judge.verdict import CheckKind, Verdict
from fuseci.records.harness import read_record
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
    assert schema.text(schema.generate()) == text
    enums = _enums(json.loads(text))
    assert enums["gates"] == list(quantities.gateable())
    assert enums["expect"] == list(quantities.gains())
    assert enums["caught_by"] == [*CHECK_NAMES, *quantities.gateable()]


def _enums(generated: dict[str, object]) -> dict[str, list[str]]:
    """The schema's enums that the catalogue makes: gateable quantities, gains, checks."""
    defs: Any = generated["definitions"]
    case, long = defs["Case"]["properties"], defs["LongVariant"]["properties"]
    return {
        "gates": case["gates"]["anyOf"][0]["propertyNames"]["enum"],
        "expect": case["expect"]["anyOf"][0]["propertyNames"]["enum"],
        "caught_by": long["caught_by"]["anyOf"][0]["enum"],
    }


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
        names.GLOBAL_LOAD_BYTES: "exact",
        names.GLOBAL_STORE_BYTES: "exact",
        names.TMA_LOAD_BYTES: "exact",
        names.TMA_STORE_BYTES: "exact",
        names.INSTRUCTIONS: "exact",
        names.L2_READ_BYTES: "0.5%",
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
    generated = schema.generate()
    enums = _enums(generated)
    assert names.L2_WRITE_SECTORS in enums["gates"] and names.L2_WRITE_SECTORS in enums["caught_by"]
    assert names.L2_WRITE_SECTORS not in enums["expect"]  # no gain: expectations bound gains
    assert generated != json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))  # out of step until rewritten
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

    from helpers import ROOT

    text = (ROOT / "docs" / "SUITES.md").read_text(encoding="utf-8")
    table = text.split("| quantity | gain means |", 1)[1].split("\n\n", 1)[0]
    listed = [n for row in table.splitlines()[2:] for n in re.findall(r"`([^`]+)`", row.split("|")[1])]
    assert sorted(listed) == sorted(quantities.gains())  # each once, none missing


#: A counted quantity of each kind (:class:`fuseci.config.quantities.Counted`), as the catalogue's
#: bytes and instructions are; its source is in the recorded reports.
COUNTED_BYTES = replace(SECTORS, name="exact_sectors", label="exact sectors", unfused=False, counted=Counted.BYTES)
COUNTED_WORK = replace(SECTORS, name="exact_work", label="exact work", unfused=False, counted=Counted.WORK)


@pytest.fixture
def with_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quantities, "QUANTITIES", (*quantities.QUANTITIES, COUNTED_BYTES, COUNTED_WORK))


def _checks(comparison, variant: str, case: str = "scale_relu_add", quantity: str = COUNTED_BYTES.name) -> list:  # type: ignore[no-untyped-def]
    return [
        k
        for c in comparison.cases
        for k in c.checks
        if k.quantity == quantity and k.case == case and k.variant == variant
    ]


def _with(baseline: Baseline, entry: VariantBaseline) -> Baseline:
    cases = {**baseline.cases, "scale_relu_add": {**baseline.cases["scale_relu_add"], "fused": entry}}
    return replace(baseline, cases=cases)


def _repeating(entry: VariantBaseline) -> VariantBaseline:
    """``entry`` as a baseline profiled more than once records it: every count repeated."""
    kernels = tuple(replace(k, spread={q: 0.0 for q in k.counts}) for k in entry.kernels)
    return replace(entry, kernels=kernels)


def test_bytes_are_compared_whatever_the_kernels_became(with_exact: None) -> None:
    """Equal counts pass and one more regresses, naming the kernel whose count moved; once the
    variant's kernels are another build (a grid that changed, as another autotuned configuration
    or an edit brings), bytes are still compared, with what changed as context; and a candidate
    that launches other kernels than the variant it is judged against is compared too."""
    suite = load_suite(ELEMENTWISE.parent / "mutants.yaml")
    results = metrics.summarize(
        read_report(REPORTS / "mutants.ncu-rep.xz"), read_record(REPORTS / "mutants.harness.json")
    )
    baseline = from_results(results, {c.id for c in suite.cases})
    same = compare(results, suite, baseline)
    (fused,) = _checks(same, "fused")
    assert fused.verdict is Verdict.PASS and fused.change == 0
    (sync,) = _checks(same, "host_sync")  # the fused kernel and a read-back: the same kernel, counted
    assert sync.verdict is Verdict.PASS and sync.baseline_value == fused.current
    (defused,) = _checks(same, "defused")  # two kernels, the intermediate through L2: more sectors
    assert defused.message.startswith("caught as planted: exact sectors of defused rose")  # a planted regression
    assert "its kernels changed" not in defused.message  # the variant's cause, said once, not each check's
    assert _checks(same, "unfused") == []  # fused variants and candidates only

    entry = baseline.cases["scale_relu_add"]["fused"]
    count = entry.values[COUNTED_BYTES.name]
    (k0, *rest) = entry.kernels
    assert k0.counts[COUNTED_BYTES.name] == count
    lower = {**k0.counts, COUNTED_BYTES.name: count - 1}
    one_less = VariantBaseline(
        values={**entry.values, COUNTED_BYTES.name: count - 1}, kernels=(replace(k0, counts=lower), *rest)
    )
    (up,) = _checks(compare(results, suite, _with(baseline, one_less)), "fused")
    assert up.verdict is Verdict.REGRESSED and "exact sectors of fused rose" in up.message
    assert f"in {k0.name} +1" in up.message and "rebuilt" not in up.message

    regridded = replace(one_less, kernels=(replace(one_less.kernels[0], grid=k0.grid * 2), *rest))
    judged = compare(results, suite, _with(baseline, regridded))
    (moved,) = _checks(judged, "fused")
    assert moved.verdict is Verdict.REGRESSED, moved.message
    (cause,) = [v.cause for c in judged.cases for v in c.variants if (c.case, v.variant) == ("scale_relu_add", "fused")]
    assert cause is not None and f"({k0.name}: grid {k0.grid * 2} -> {k0.grid})" in cause.said(), cause


def test_instructions_are_judged_on_the_same_build_only(with_exact: None, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A count of work is gated where the baseline's passes say it repeats and the kernels are the
    same build; across a rebuild it is shown, not gated, unless the suite states its gate; a
    baseline recorded with one pass says nothing of whether it repeats, so it is shown then too."""
    suite = load_suite(ELEMENTWISE.parent / "mutants.yaml")
    results = metrics.summarize(
        read_report(REPORTS / "mutants.ncu-rep.xz"), read_record(REPORTS / "mutants.harness.json")
    )
    baseline = from_results(results, {c.id for c in suite.cases})
    entry = baseline.cases["scale_relu_add"]["fused"]
    work = COUNTED_WORK.name

    def fused(base: Baseline, gated: object = suite) -> object:
        (k,) = _checks(compare(results, gated, base), "fused", quantity=work)  # type: ignore[arg-type]
        return k

    single = replace(entry, values={**entry.values, work: entry.values[work] - 1})
    k = fused(_with(baseline, single))
    assert k.verdict is Verdict.PASS and "not gated: the baseline was profiled once" in k.message
    assert any("profiled once" in n for n in compare(results, suite, _with(baseline, single)).notes)

    repeated = _repeating(single)
    assert fused(_with(baseline, repeated)).verdict is Verdict.REGRESSED  # the same build, known to repeat

    (k0, *rest) = repeated.kernels
    rebuilt = replace(repeated, kernels=(replace(k0, registers=k0.registers + 8), *rest))
    k = fused(_with(baseline, rebuilt))
    assert k.verdict is Verdict.PASS and "not gated: its kernels changed" in k.message
    assert f"registers {k0.registers + 8} -> {k0.registers}" in k.message

    stated = write(
        tmp_path / "mutants.yaml",
        (ELEMENTWISE.parent / "mutants.yaml")
        .read_text()
        .replace("    launches: exact\n", f"    launches: exact\n    {work}: exact\n", 1),
    )
    gated = load_suite(stated)
    assert work in gated.cases[0].stated_gates
    assert fused(_with(baseline, rebuilt), gated).verdict is Verdict.REGRESSED  # the suite asks


def test_a_count_that_moved_between_passes_gets_a_band(with_exact: None) -> None:
    """Where the baseline's profiled passes saw a count move, it is judged within a band of
    MOVING_FACTOR times that: a library kernel's count moving as much again passes, and the
    message says how far it moved; a count that repeated stays exact."""
    from fuseci.judge.counters import MOVING_FACTOR

    suite = load_suite(ELEMENTWISE.parent / "mutants.yaml")
    results = metrics.summarize(
        read_report(REPORTS / "mutants.ncu-rep.xz"), read_record(REPORTS / "mutants.harness.json")
    )
    baseline = from_results(results, {c.id for c in suite.cases})
    entry = baseline.cases["scale_relu_add"]["fused"]
    count = entry.values[COUNTED_BYTES.name]
    moved = 1000.0
    kernels = tuple(
        replace(k, spread={q: (moved if q == COUNTED_BYTES.name else 0.0) for q in k.counts}) for k in entry.kernels
    )
    for delta, verdict in (
        (MOVING_FACTOR * moved * 0.9, Verdict.PASS),
        (MOVING_FACTOR * moved * 1.1, Verdict.REGRESSED),
    ):
        lower = VariantBaseline(values={**entry.values, COUNTED_BYTES.name: count - delta}, kernels=kernels)
        (k,) = _checks(compare(results, suite, _with(baseline, lower)), "fused")
        assert k.verdict is verdict, k.message
        assert "it moved by up to 1,000 over the profiled passes" in k.message


def test_a_report_without_the_counters_is_not_judged_on_them() -> None:
    """Reports recorded before fuseci counted global bytes and instructions have no values for
    them: no check, rather than a count of zero."""
    from fuseci.frames.report import read_report

    kernels = read_report(REPORTS / "elementwise.ncu-rep.xz")
    exact = [names.GLOBAL_LOAD_BYTES, names.GLOBAL_STORE_BYTES, names.INSTRUCTIONS, names.L2_READ_BYTES]
    for source in (names.GLOBAL_LOAD_BYTES, names.GLOBAL_STORE_BYTES, names.INSTRUCTIONS, names.L2_READ_SECTORS):
        kernels[source] = float("nan")  # as an older report reads
    results = metrics.summarize(kernels, read_record(REPORTS / "elementwise.harness.json"))
    fused = results.variant_values("scale_relu_add", "fused")
    assert fused is not None and all(fused[q] != fused[q] for q in exact)  # NaN, not 0
    suite = load_suite(ELEMENTWISE)
    comparison = compare(results, suite, from_results(results, {c.id for c in suite.cases}))
    assert not [k for c in comparison.cases for k in c.checks if k.quantity in exact]


def test_one_more_sector_reads_to_the_byte() -> None:
    """The recorded reports count global bytes loaded exactly: a baseline 32 bytes lower (one
    sector) makes the fused variant REGRESSED, and the message shows the bytes to the byte and the
    difference, where megabytes and a percentage would both read unchanged."""
    from fuseci.frames.report import read_report

    suite = load_suite(ELEMENTWISE)
    results = metrics.summarize(
        read_report(REPORTS / "elementwise.ncu-rep.xz"), read_record(REPORTS / "elementwise.harness.json")
    )
    baseline = from_results(results, {c.id for c in suite.cases})
    entry = baseline.cases["scale_relu_add"]["fused"]
    loaded = entry.values[names.GLOBAL_LOAD_BYTES]
    assert loaded > 1e8 and loaded == int(loaded)
    lower = VariantBaseline(values={**entry.values, names.GLOBAL_LOAD_BYTES: loaded - 32}, kernels=entry.kernels)
    cases = {**baseline.cases, "scale_relu_add": {**baseline.cases["scale_relu_add"], "fused": lower}}
    comparison = compare(results, suite, replace(baseline, cases=cases))
    gated = [k for c in comparison.cases for k in c.checks if k.quantity == names.GLOBAL_LOAD_BYTES]
    (k,) = [k for k in gated if k.case == "scale_relu_add" and k.variant == "fused"]
    assert k.verdict is Verdict.REGRESSED
    assert k.message == (
        f"global bytes loaded of fused rose from {loaded - 32:,.0f} bytes to {loaded:,.0f} bytes (+32); tolerance exact"
    )
    others = [o for o in gated if o is not k]
    assert len(others) >= 4 and all(o.verdict is Verdict.PASS for o in others)  # every other fused variant
