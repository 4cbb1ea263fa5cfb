"""The HTML report as a person sees it: the recorded regressed run's report opened from a file in
a real headless Chromium (Debian's, driven by Playwright): it loads without a console error or a
request for anything outside the file, every chart drew, and the failing case (the split kernel
of scale_relu_add and its fallen gains) is on the first screen. A screenshot of that screen is
written to $FUSECI_SCREENSHOT_DIR (else the test's temporary directory) and its path printed,
pass or fail.

Skipped when Chromium or Playwright is missing, except in CI (``CI`` set), where that fails:
`.ci/run` installs both.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import VIEWPORT, regressed_html


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("html") / "elementwise-regressed.html"
    path.write_text(regressed_html(), encoding="utf-8")
    return path


def _screenshot_dir(tmp_path: Path) -> Path:
    directory = Path(os.environ.get("FUSECI_SCREENSHOT_DIR") or tmp_path)
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def test_report_loads_draws_and_shows_the_failure_first(
    browser: Any, report: Path, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    page = browser.new_page(viewport=VIEWPORT)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("request", lambda r: None if r.url.startswith(("file:", "data:")) else problems.append(f"request {r.url}"))
    page.goto(report.as_uri(), wait_until="load")

    charts = page.evaluate(
        """() => [...document.querySelectorAll('figure.chart')].map(f => {
            const svg = f.querySelector('svg'); const r = svg ? svg.getBoundingClientRect() : null;
            return {id: f.id, width: r ? r.width : 0, height: r ? r.height : 0,
                    marks: svg ? svg.querySelectorAll('path, use, rect').length : 0,
                    texts: svg ? [...svg.querySelectorAll('text')].filter(t => t.getBBox().width > 0).length : 0};
        })"""
    )
    assert len(charts) == 15
    for chart in charts:
        assert chart["width"] > 200 and chart["height"] > 60 and chart["marks"] > 5 and chart["texts"] > 2, chart

    first_screen = page.evaluate(
        """() => [...document.querySelectorAll('#failures li, #failures h3')].map(e => {
            const r = e.getBoundingClientRect();
            return {text: e.innerText, visible: r.top >= 0 && r.bottom <= window.innerHeight && r.width > 0};
        })"""
    )
    visible = " ".join(" ".join(e["text"].split()) for e in first_screen if e["visible"])
    assert "elementwise / scale_relu_add" in visible
    assert "the fusion split: fuseci_scale_relu_add became fuseci_mutant_scale_relu + fuseci_mutant_add" in visible
    for fallen in ("fell from 3x to 1.5x", "fell from 2.32x to 1.4x", "fell from 5.03x to 2.95x"):
        assert fallen in visible
    assert all(e["visible"] for e in first_screen), [e["text"] for e in first_screen if not e["visible"]]
    assert page.evaluate("window.scrollY") == 0

    shot = _screenshot_dir(tmp_path) / "elementwise-regressed-first-screen.png"
    page.screenshot(path=str(shot))
    # shown at the end of the run (conftest.py) even when the test passes: CI keeps the file
    record_property("screenshot", f"screenshot of the HTML report's first screen: {shot}")
    page.close()
    assert problems == []
