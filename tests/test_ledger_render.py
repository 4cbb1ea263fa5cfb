"""The ledger's reporters: its terminal lines, its HTML fragment (sorted, escaped, folded,
bounded) and, in a real headless Chromium, the fragment alone and a report whose case holds a
real ledger (the row order, the bar as drawn, what changed since the baseline's)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import ledgers as L
import pytest
from helpers import VIEWPORT, ledger_fragment, parse

from fuseci.ledger.diff import diff
from fuseci.ledger.gate import judge
from fuseci.records.fusion import Kind, Ledger, Node, Row
from fuseci.reporters import budget, html, ledger_html, templating
from fuseci.reporters import ledger as report
from tests.reporters.ledger_results import ledger_comparison, real_ledger

HOSTILE_LINE = "block.py:3: <script>alert(1)</script>"


def hostile() -> Ledger:
    """The block with a row whose nodes' names and source line are markup, one of many nodes,
    and an untraced row with no minimum."""
    base = L.block()
    nodes = tuple(Node(f"n{i}", "aten.mul.Tensor", f'<img src=x onerror="{i}">', HOSTILE_LINE) for i in range(5))
    odd = replace(base.rows[6], nodes=nodes + base.rows[6].nodes, note="<b>note</b>\nsecond line")
    untraced = Row("0/0", "(untraced)", Kind.UNTRACED, (), L.measured("memset", 4096, 0, 4096, 2_000), None)
    return replace(base, rows=(untraced, *base.rows[:6], odd, *base.rows[7:]))


def ratios_in(html: str) -> list[str]:
    root, _ = parse(html)
    return [tr.attrs["data-ratio"] for tr in root.find_all("tr") if "data-ratio" in tr.attrs]


def test_the_rows_are_sorted_by_ratio_rows_without_a_minimum_last() -> None:
    ratios = ratios_in(ledger_fragment(hostile()))
    assert len(ratios) == 10 and ratios[-1] == ""
    values = [float(r) for r in ratios[:-1]]
    assert values == sorted(values, reverse=True) and values[0] > values[-1]


def test_user_data_is_escaped_and_many_nodes_fold() -> None:
    html = ledger_fragment(hostile(), judge(L.block(), hostile()))
    assert "<script" not in html and "<img" not in html and "<b>note" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" not in html  # the label shows the place, not the code
    assert "&lt;img src=x onerror=&#34;0&#34;&gt; (block.py:3)" in html
    root, _ = parse(html)
    (folded,) = root.find_all("details")
    assert folded.find_all("summary")[0].all_text() == "3 more"
    assert "second line" in html and "\\n" in html  # a newline in a note is shown, never a line break


def test_a_hostile_code_line_is_escaped_where_it_is_shown() -> None:
    ledger = hostile()
    line = HOSTILE_LINE.replace("block.py:3", "block.py")
    odd = replace(ledger.rows[7], nodes=(Node("x", "aten.mul.Tensor", "", line),), note=line)
    html = ledger_fragment(replace(ledger, rows=(*ledger.rows[:7], odd, *ledger.rows[8:])))
    assert "<script" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_the_terminal_lines_are_a_table_and_a_total() -> None:
    lines = report.ledger_lines(L.block())
    assert lines[0].split() == ["ratio", "requested", "DRAM", "minimum", "launches", "time", "kind", "kernel"]
    assert lines[1].endswith("triton  triton_poi_fused_add_view_3") and lines[1].startswith("1.05x")
    assert lines[2].startswith("    ") and "(block.py:" in lines[2]  # the row's nodes, under it
    # a ledger recorded without the bytes the SMs asked for: its ratios are DRAM's, and it says so
    assert lines[-2] == "forward: 526.3 MB of DRAM over 9 rows; floor 58.7 MB (9.0x)"
    assert lines[-1] == f"note: {report.DRAM_BASIS}"
    verdict = report.verdict_lines(judge(L.block(), L.split_add_norm()))
    assert verdict[0] == "ledger: REGRESSED  (1 regressed, 3 notes)"
    assert verdict[1].startswith("  REGRESSED split: add (block.py:17) and layer_norm_1 (block.py:19) ran in")
    assert all("\n" not in x for x in report.ledger_lines(hostile()))


def test_the_summary_line_names_the_kernels_the_floor_and_the_worst_row() -> None:
    assert report.summary_line(L.block()) == (
        "9 kernels, 526.3 MB measured against a 58.7 MB floor; worst triton_poi_fused_add_view_3 at 1.05x its minimum"
    )
    split = report.summary_line(L.split_add_norm())
    assert split.startswith("10 kernels in 2 graphs, ") and " against a 58.7 MB floor" in split
    blind = replace(L.block(), floor_bytes=None, rows=tuple(replace(r, min_bytes=None) for r in L.block().rows))
    assert report.summary_line(blind) == "9 kernels, 526.3 MB measured with no floor (shapes unknown)"
    odd = hostile()
    unmeasured = replace(odd, rows=(replace(odd.rows[0], kernel="k\n<x>", measured=None), *odd.rows[1:]))
    line = report.summary_line(unmeasured)
    assert line.startswith("10 kernels (1 not measured), ") and "\n" not in line


def test_what_changed_is_the_upgrade_diff_bounded() -> None:
    lines, left = report.change_lines(diff(L.block(), L.split_add_norm()))
    assert left == 0 and any("was fused with layer_norm_1 (block.py:19)" in x and "now alone" in x for x in lines)
    assert report.change_lines(diff(L.block(), L.noisy(L.block()))) == (["no node of the model changed company"], 0)
    few, more = report.change_lines(diff(L.block(), L.split_add_norm()), limit=1)
    assert len(few) == 1 and more == len(lines) - 1 > 0


def test_the_fragment_shows_what_changed_above_the_table() -> None:
    html_text = ledger_fragment(L.split_add_norm(), changes=diff(L.block(), L.split_add_norm()))
    root, _ = parse(html_text)
    (changes,) = root.find_all("div", cls="ledger-changes")
    assert "was fused with layer_norm_1 (block.py:19)" in changes.all_text()
    assert html_text.index("ledger-changes") < html_text.index("ledger-rows")
    assert "ledger-changes" not in ledger_fragment(L.split_add_norm())


def _wide(rows: int, nodes: int) -> Ledger:
    """A ledger of ``rows`` rows of ``nodes`` hostile nodes each, with long names."""
    base = L.block().rows[6]
    many = tuple(Node(f"n{i}_" + "&" * 150, "aten.mul.Tensor", '"' * 150, f"m.py:{i}: y") for i in range(nodes))
    made = tuple(replace(base, kernel=f"k{i}_" + "<" * 300, nodes=many, note="&" * 5000) for i in range(rows))
    return replace(L.block(), rows=made)


def test_a_large_ledger_stays_within_its_bytes_and_counts_the_rest() -> None:
    ledger = _wide(300, 500)
    shown = ledger_html.view(ledger, size=ledger_html.CASE_BYTES)
    assert 0 < len(shown.rows) < 300 and shown.more == f"and {300 - len(shown.rows)} more rows"
    assert shown.weight <= ledger_html.CASE_BYTES
    assert len(ledger_fragment(ledger).encode()) <= ledger_html.CASE_BYTES
    row = shown.rows[0]
    assert len(row.nodes) == ledger_html.OPEN_NODES and len(row.more_nodes) == ledger_html.FOLDED_NODES
    assert row.nodes_more == f"and {500 - ledger_html.OPEN_NODES - ledger_html.FOLDED_NODES} more nodes"
    # a few hundred ordinary rows are all shown
    ordinary = replace(L.block(), rows=L.block().rows * 40)
    assert len(ledger_html.view(ordinary).rows) == 360 and ledger_html.view(ordinary).more == ""


def test_the_ledger_in_a_browser_shows_rows_worst_first_under_its_bar(browser: Any, tmp_path: Path) -> None:
    path = tmp_path / "ledger.html"
    verdict = judge(L.block(), hostile())
    view = ledger_html.view(hostile(), verdict, None, budget.PAGE_BYTES - 200_000)  # a ledger in a page of its own
    document = templating.render("ledger_page.html.j2", title=f"fusion ledger: {verdict.verdict.name}", ledger=view)
    path.write_text(document, encoding="utf-8")
    page = browser.new_page(viewport=VIEWPORT)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("dialog", lambda d: problems.append(f"dialog {d.message}"))
    page.goto(path.as_uri(), wait_until="load")
    shown = page.evaluate(
        """() => [...document.querySelectorAll('table.ledger-rows tbody tr')].map(tr => ({
            ratio: tr.cells[6].innerText, kernel: tr.cells[0].innerText, top: tr.getBoundingClientRect().top}))"""
    )
    ratios = [float(r["ratio"].rstrip("x")) for r in shown if r["ratio"]]
    assert len(shown) == 10 and ratios == sorted(ratios, reverse=True)
    assert shown[-1]["ratio"] == "" and shown[-1]["kernel"] == "(untraced)"
    assert [r["top"] for r in shown] == sorted(r["top"] for r in shown)
    bar = page.evaluate(
        """() => { const f = document.querySelector('figure.ledger-bar');
            const box = e => f.querySelector(e).getBoundingClientRect();
            return {track: box('.track'), measured: box('.measured'), floor: box('.floor'),
                    table: document.querySelector('table.ledger-rows').getBoundingClientRect().top,
                    caption: f.querySelector('figcaption').innerText}; }"""
    )
    ledger = hostile()
    assert ledger.floor_bytes is not None
    share = ledger.floor_bytes / ledger.measured_bytes
    assert bar["measured"]["width"] == pytest.approx(bar["track"]["width"] - 2, abs=1.5)  # the whole track
    floor_at = (bar["floor"]["left"] - bar["track"]["left"]) / bar["track"]["width"]
    assert floor_at == pytest.approx(share, abs=0.01) and bar["floor"]["height"] > bar["measured"]["height"]
    assert bar["track"]["bottom"] < bar["table"]
    assert bar["caption"].startswith("measured 526.3 MB of DRAM against a floor of 58.7 MB")
    assert problems == []


def test_a_report_with_a_real_ledger_in_a_browser(browser: Any, tmp_path: Path) -> None:
    """A model suite judged with the ledgers of tests/data/ledger: the case shows the ledger's
    rows worst first under its bar, what changed since the baseline's above them, and the ledger
    checks among the case's checks."""
    comparison = ledger_comparison()
    path = tmp_path / "report.html"
    path.write_text(html.render([comparison]), encoding="utf-8")
    tab = browser.new_page(viewport=VIEWPORT)
    problems: list[str] = []
    tab.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    tab.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    tab.goto(path.as_uri(), wait_until="load")
    shown = tab.evaluate(
        """() => { const l = document.querySelector('article.case div.ledger-of[data-variant="compiled"]');
            const top = e => l.querySelector(e).getBoundingClientRect().top;
            return {rows: [...l.querySelectorAll('table.ledger-rows tbody tr')].map(tr => tr.cells[6].innerText),
                    kernels: [...l.querySelectorAll('table.ledger-rows tbody tr')].map(tr => tr.cells[0].innerText),
                    bar: top('figure.ledger-bar .track'), changes: top('div.ledger-changes'),
                    table: top('table.ledger-rows'), changed: l.querySelector('div.ledger-changes').innerText,
                    caption: l.querySelector('figure.ledger-bar figcaption').innerText,
                    checks: [...document.querySelectorAll('table.checks tbody tr')].map(tr => tr.innerText)}; }"""
    )
    ledger = real_ledger("block-break_add_norm")
    expected = [r.kernel for r in report.sorted_rows(ledger)]
    ratios = [float(r.rstrip("x")) for r in shown["rows"]]
    assert shown["kernels"] == expected and ratios == sorted(ratios, reverse=True) and len(ratios) == 10
    assert shown["bar"] < shown["changes"] < shown["table"]
    assert shown["caption"].startswith(f"measured {report.megabytes(ledger.measured_bytes)} of DRAM against a floor")
    assert "x (models32.py:25): was fused with layer_norm_1 (models32.py:30)" in shown["changed"]
    assert "now alone in triton_poi_fused_add_view_1" in shown["changed"]
    ledger_checks = [c for c in shown["checks"] if "\tledger\t" in c]
    assert len(ledger_checks) == 5 and ledger_checks[0].startswith("REGRESSED\tledger\tcompiled\tsplit")
    assert any(report.megabytes(ledger.measured_bytes).replace(" MB", "") in c for c in ledger_checks)
    assert problems == []
