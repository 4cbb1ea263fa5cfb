"""Ledger checks and ledgers in every report of judged suites: the console (one line per ledger,
its findings among the other check lines, the rows and changes under ``-v``), the Markdown step
summary, JUnit and the HTML report (the ledger in its case's section, escaped and bounded)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import replace

import ledgers as L
from helpers import parse

from fuseci.judge.verdict import CaseResult, CheckKind, Comparison, MetricDelta, VariantMeasurement, Verdict
from fuseci.ledger.diff import diff
from fuseci.records.fusion import Ledger, Node
from fuseci.reporters import console, html, html_case, junit, ledger_html, markdown
from fuseci.reporters import ledger as report
from fuseci.reporters.budget import PAGE_BYTES
from fuseci.reporters.text import LEDGER_MESSAGE, message
from tests.reporters.ledger_results import ledger_comparison, real_ledger

HOSTILE = '<script>alert("x")</script>\n::error ::@team #12 $x$ | `tick`'


def _with(comparison: Comparison, **changes: object) -> Comparison:
    """``comparison`` with its one case changed."""
    (case,) = comparison.cases
    return replace(comparison, cases=(replace(case, **changes),))


def _hostile_ledger() -> Ledger:
    """The block with a node whose name and source line are markup and a command."""
    base = L.block()
    node = Node(HOSTILE, "aten.mul.Tensor", HOSTILE, f"m.py:3: {HOSTILE}")
    odd = replace(base.rows[8], kernel=f"triton_{HOSTILE}", nodes=(node, *base.rows[8].nodes), note=HOSTILE)
    return replace(base, rows=(*base.rows[:8], odd))


def _hostile() -> Comparison:
    """A model suite whose ledger and ledger checks hold hostile strings, one check very long."""
    long = MetricDelta("block", "compiled", CheckKind.LEDGER, "split", Verdict.REGRESSED, (HOSTILE + " ") * 400)
    warn = MetricDelta("block", "compiled", CheckKind.LEDGER, "structural", Verdict.WARN, f"note {HOSTILE}")
    variants = (
        VariantMeasurement("eager", {}, {}, ()),
        VariantMeasurement(
            "compiled",
            {},
            {},
            (),
            ledger=_hostile_ledger(),
            baseline_ledger=L.block(),
            ledger_changes=tuple(diff(L.block(), _hostile_ledger())),
        ),
    )
    return _with(ledger_comparison(), checks=(long, warn), variants=variants)


def test_the_console_prints_one_line_per_ledger_and_its_findings_as_check_lines() -> None:
    text = console.render([ledger_comparison()])
    lines = text.splitlines()
    ledger = real_ledger("block-break_add_norm")
    (line,) = [x for x in lines if x.startswith("  ledger ")]
    assert line == f"  ledger block/compiled: {report.summary_line(ledger)}"
    assert line.startswith("  ledger block/compiled: 10 kernels in 2 graphs, 538.4 MB measured against a 92.3 MB floor")
    head = lines.index("  REGRESSED  block/compiled  suites/models.yaml:7")
    block = lines[head + 1 : lines.index("", head)]
    assert block[0].startswith(
        "    - x (models32.py:25), layer_norm_1 (models32.py:30) and add_1 (models32.py:30) ran in"
    )
    assert "    - 2 compiled graph(s), was 1" in block and block[-1] == "    (1 more check pass)"
    assert lines.index(line) < head
    # nothing of the ledger's rows or changes without -v
    assert "was fused with" not in text and "forward: " not in text


def test_verbose_adds_the_rows_and_what_changed() -> None:
    text = console.render([ledger_comparison()], verbose=True)
    lines = text.splitlines()
    start = lines.index(next(x for x in lines if x.startswith("  ledger block/compiled: ")))
    table = lines[start + 1 : start + 22]  # its heading, then each row's line and its nodes' under it
    assert table[0].split() == ["ratio", "requested", "DRAM", "minimum", "launches", "time", "kind", "kernel"]
    kernels = [x.split()[-1] for x in table[1::2]]
    rows = report.sorted_rows(real_ledger("block-break_add_norm"))
    assert kernels == [report.kernel_name(r.kernel) for r in rows]
    assert all(x.startswith("        ") for x in table[2::2])
    assert lines[start + 22].startswith("    forward: 538.4 MB of DRAM over 10 rows in 2 graphs")
    assert lines[start + 23].startswith("    note: ratios are of DRAM bytes")  # recorded without requested bytes
    assert lines[start + 24] == "    since the baseline's ledger:"
    assert lines[start + 25].startswith("      x (models32.py:25): was fused with layer_norm_1 (models32.py:30)")


def test_no_baseline_ledger_no_changes_and_a_ledger_without_checks_still_has_its_line() -> None:
    text = console.render([ledger_comparison(baseline=None)], verbose=True)
    assert "  ledger block/compiled: 10 kernels in 2 graphs" in text and "since the baseline" not in text


def test_hostile_ledger_strings_stay_one_line_and_long_messages_are_cut() -> None:
    comparison = _hostile()
    text = console.render([comparison], verbose=True)
    assert "\x1b" not in text and all(not x.startswith("::") for x in text.splitlines())
    bullets = [x for x in text.splitlines() if x.startswith("    - ")]
    assert len(bullets) == 2 and len(bullets[0]) < LEDGER_MESSAGE + 60
    assert bullets[0].endswith(" more characters)") and "\\n" in bullets[0]
    long = comparison.cases[0].checks[0]
    assert message(long).startswith(long.message[:LEDGER_MESSAGE]) and len(message(long)) < LEDGER_MESSAGE + 40
    gain = replace(long, check=CheckKind.GAIN)
    assert message(gain) == long.message  # other checks' messages are their own


def test_markdown_lists_ledger_findings_as_checks_bounded_and_inert() -> None:
    doc = markdown.render([ledger_comparison()])
    head = doc.index("**REGRESSED** block/compiled")
    bullets = doc[head:].split("\n\n")[0].splitlines()[1:]
    assert len(bullets) == 4 and bullets[0].startswith("  - x (models32.py:25), layer_norm_1 (models32.py:30)")
    hostile = markdown.render([_hostile()])
    assert "<script" not in hostile and "\n::error" not in hostile and "@team" not in hostile
    (long,) = [x for x in hostile.splitlines() if x.startswith("  - ") and "more characters" in x]
    assert len(re.sub(r"&[a-z#0-9]+;|<span>\$</span>|\\", "", long)) < LEDGER_MESSAGE + 60


def test_junit_has_a_test_per_ledger_finding_whose_body_carries_the_ledger() -> None:
    root = ET.fromstring(junit.render([ledger_comparison()]).encode())
    names = [tc.get("name") for tc in root.iter("testcase")]
    assert names == [
        "block.compiled.ledger[split]",
        "block.compiled.ledger[structural]",
        "block.compiled.ledger[structural]#2",
        "block.compiled.ledger[structural]#3",
        "block.compiled.ledger[bytes]",
    ]
    failure = root.find("testsuite/testcase[@name='block.compiled.ledger[split]']/failure")
    assert failure is not None and failure.get("message", "").startswith("x (models32.py:25), layer_norm_1")
    body = (failure.text or "").splitlines()
    summary = report.summary_line(real_ledger("block-break_add_norm"))
    assert body[1] == f"ledger: {summary}" and body[2] == "since the baseline's ledger:"
    assert body[3].startswith("  x (models32.py:25): was fused with layer_norm_1 (models32.py:30)")
    warned = root.find("testsuite/testcase[@name='block.compiled.ledger[structural]#2']/system-out")
    assert warned is not None and (warned.text or "").startswith("WARNING: WARN: 2 compiled graph(s), was 1")
    hostile = ET.fromstring(junit.render([_hostile()]).encode())
    failure = hostile.find("testsuite/testcase/failure")
    assert failure is not None and len(failure.get("message", "")) < LEDGER_MESSAGE + 60
    assert "\n" not in failure.get("message", "")


def test_the_html_case_shows_its_ledger_and_its_ledger_checks() -> None:
    root, _ = parse(html.render([ledger_comparison()]))
    (article,) = root.find_all("article", cls="case")
    (section,) = article.find_all("div", cls="ledger-of")
    assert section.attrs["data-variant"] == "compiled"
    ratios = [float(tr.attrs["data-ratio"]) for tr in section.find_all("tr") if "data-ratio" in tr.attrs]
    assert len(ratios) == 10 and ratios == sorted(ratios, reverse=True)
    assert section.find_all("figure", cls="ledger-bar") and section.find_all("div", cls="ledger-changes")
    checks = [tr.all_text() for tr in article.find_all("table", cls="checks")[0].find_all("tr")[1:]]
    assert len([c for c in checks if "ledger" in c]) == 5
    (total,) = [c for c in checks if "the forward's DRAM bytes" in c]
    assert "538.4 MB" in total and "526.3 MB" in total and "+2.3%" in total
    (failure,) = root.find_all("div", cls="failure")
    assert "x (models32.py:25), layer_norm_1 (models32.py:30) and add_1" in failure.all_text()


def test_a_case_without_a_ledger_has_no_ledger_section() -> None:
    comparison = ledger_comparison()
    plain = _with(comparison, variants=tuple(replace(v, ledger=None) for v in comparison.cases[0].variants))
    page = html.render([plain])
    assert 'class="ledger-of"' not in page and 'class="ledger-rows"' not in page


def test_hostile_ledger_strings_cannot_become_markup_in_the_page() -> None:
    page = html.render([_hostile()])
    assert "<script" not in page and "&lt;script&gt;" in page
    root, _ = parse(page)
    assert not root.find_all("script")


def _big(rows: int, nodes: int) -> Ledger:
    """A model of ``rows`` kernels of ``nodes`` nodes each, with long names and lines."""
    base = L.block().rows[6]
    made = []
    for i in range(rows):
        many = tuple(
            Node(
                f"mul_{i}_{j}", "aten.mul.Tensor", f"layer_{i}", f"model/deep/path/blocks.py:{j}: y = x * w" + "w" * 60
            )
            for j in range(nodes)
        )
        made.append(replace(base, kernel=f"triton_poi_fused_mul_{i}_" + "x" * 60, nodes=many))
    return replace(L.block(), rows=tuple(made))


def test_a_few_hundred_rows_fit_and_the_page_stays_within_its_budget() -> None:
    """Six variants with ledgers of 300 rows of 12 nodes each, and baselines: the section shows
    what fits within the case's bytes, counts the rest, and the page stays within 3 MB."""
    big, base = _big(300, 12), _big(280, 12)
    changes = tuple(diff(base, big))
    variants = tuple(
        VariantMeasurement(f"compiled{i}", {}, {}, (), ledger=big, baseline_ledger=base, ledger_changes=changes)
        for i in range(6)
    )
    comparison = _with(ledger_comparison(), variants=variants)
    view = html_case.case_view(comparison, comparison.cases[0], "case-0")
    shown = len(view.ledgers)
    assert 1 <= shown <= ledger_html.LEDGERS and view.ledgers_more == f"and {6 - shown} more ledgers"
    assert sum(s.view.weight for s in view.ledgers) <= ledger_html.CASE_BYTES
    first = view.ledgers[0].view
    assert first.more.startswith("and ") and 20 < len(first.rows) < 300 and first.changes
    page = html.render([comparison])
    assert len(page.encode()) <= PAGE_BYTES
    root, _ = parse(page)
    assert len(root.find_all("div", cls="ledger-of")) == shown and f"and {6 - shown} more ledgers" in page
    # one ledger of 300 rows of a few nodes, as a model of a few dozen layers has, is shown whole
    whole = _with(ledger_comparison(), variants=(VariantMeasurement("compiled", {}, {}, (), ledger=_big(300, 3)),))
    (section,) = html_case.case_view(whole, whole.cases[0], "case-0").ledgers
    assert len(section.view.rows) == 300 and section.view.more == ""


def test_many_cases_with_ledgers_stay_within_the_page() -> None:
    comparison = ledger_comparison()
    case = replace(
        comparison.cases[0],
        variants=(
            VariantMeasurement(
                "compiled",
                {},
                {},
                (),
                ledger=_big(300, 6),
                baseline_ledger=_big(290, 6),
                ledger_changes=tuple(diff(_big(290, 6), _big(300, 6))),
            ),
        ),
    )
    many = replace(comparison, cases=tuple(replace(case, case=f"block{i}") for i in range(30)))
    page = html.render([many])
    assert len(page.encode()) <= PAGE_BYTES and page.count('class="ledger-of"') >= 2
    root, _ = parse(page)
    assert len(root.find_all("article", cls="case")) + len(root.find_all("tr", cls="t-bad")) >= 30


def test_case_results_without_ledger_checks_are_unchanged() -> None:
    case = CaseResult("c", 1, "", (), (VariantMeasurement("fused", {}, {}, ()),))
    assert ledger_html.sections(case) == () and ledger_html.ledgers_more(case, 0) == ""
