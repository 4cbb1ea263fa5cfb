"""The ledger's reporter: its terminal lines, its HTML fragment (sorted, escaped, folded) and the
fragment in a real headless Chromium (the row order and the bar as drawn)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import ledgers as L
import pytest
from helpers import parse

from fuseci.ledger.gate import judge
from fuseci.ledger.model import Kind, Ledger, Node, Row
from fuseci.reporters import ledger as report
from tests.reporters.test_html_browser import CHROMIUM_ARGS, VIEWPORT, _chromium

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
    ratios = ratios_in(report.fragment(hostile()))
    assert len(ratios) == 10 and ratios[-1] == ""
    values = [float(r) for r in ratios[:-1]]
    assert values == sorted(values, reverse=True) and values[0] > values[-1]


def test_user_data_is_escaped_and_many_nodes_fold() -> None:
    html = report.fragment(hostile(), judge(L.block(), hostile()))
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
    html = report.fragment(replace(ledger, rows=(*ledger.rows[:7], odd, *ledger.rows[8:])))
    assert "<script" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_the_terminal_lines_are_a_table_and_a_total() -> None:
    lines = report.ledger_lines(L.block())
    assert lines[0].split() == ["kernel", "kind", "nodes", "launches", "DRAM", "minimum", "ratio", "time"]
    assert lines[1].startswith("triton_poi_fused_add_view_3") and "1.05x" in lines[1]
    assert lines[-1] == "forward: 526 MB of DRAM over 9 rows; floor 59 MB (9.0x)"
    verdict = report.verdict_lines(judge(L.block(), L.split_add_norm()))
    assert verdict[0] == "ledger: REGRESSED  (1 regressed, 3 notes)"
    assert verdict[1].startswith("  REGRESSED split: add (block.py:17) and layer_norm_1 (block.py:19) ran in")
    assert all("\n" not in x for x in report.ledger_lines(hostile()))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = _chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


def test_the_ledger_in_a_browser_shows_rows_worst_first_under_its_bar(browser: Any, tmp_path: Path) -> None:
    path = tmp_path / "ledger.html"
    path.write_text(report.document(hostile(), judge(L.block(), hostile())), encoding="utf-8")
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
    assert bar["caption"].startswith("measured 526 MB of DRAM against a floor of 59 MB")
    assert problems == []
