"""Make the README's screenshots of the HTML reports, from the recorded reports, on any machine.

    python tools/readme_screenshots.py [--chromium /usr/bin/chromium] [--out docs]

Writes ``html-report.png`` (the first screen of the recorded regressed elementwise run's report),
``html-report-case.png`` (its failing case's charts) and ``history.png`` (the failing case's
trends in ``fuseci history`` over five runs: clean, clean, regressed, regressed, clean), taken with a headless Chromium driven by Playwright and reduced to a
256-colour palette so that they stay small. Run it from the repository root.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from PIL import Image
from playwright.sync_api import sync_playwright
from typer.testing import CliRunner

import fuseci.store.runs as run_files
from fuseci import api
from fuseci.cli import app
from fuseci.config.parse import load_suite

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REPORTS = Path("tests/data/reports")


def _invoke(*args: object) -> None:
    result = CliRunner().invoke(app, [str(a) for a in args])
    if result.exit_code not in (0, 1):
        raise SystemExit(result.output)


def _pages(root: Path, tmp: Path) -> tuple[Path, Path]:
    """The report and history pages, made in ``tmp`` as a user would from a checkout there."""
    for name in ("suites", "kernels", "baselines", "tests"):
        (tmp / name).symlink_to(root / name)
    os.chdir(tmp)
    reports = REPORTS  # relative, as in the README's walk-through: the page shows no machine path
    report = tmp / "report.html"
    regressed = reports / "elementwise-regressed.ncu-rep.xz"
    _invoke("run", "suites/elementwise.yaml", "--from-report", regressed, "--html", report)
    runs = Path("runs")
    start = datetime(2026, 11, 20, 9, 0, tzinfo=timezone.utc)
    suite = load_suite(Path("suites/elementwise.yaml"))
    # Two recordings stand for five runs a day apart, each at its own commit: saved with those
    # stamps (re-analysed through the command line, each would carry its recording's time).
    for i, kind in enumerate(["", "", "-regressed", "-regressed", ""]):
        recorded = reports / f"elementwise{kind}.ncu-rep.xz"
        _, results = api.check_results(suite, api.RunOptions(from_report=recorded))
        stamp = run_files.Stamp(start + timedelta(days=i), f"{i + 1}" * 7 + "0" * 33)
        run_files.save_run([results], {"elementwise": "suites/elementwise.yaml"}, runs, stamp)
    history = tmp / "history.html"
    _invoke("history", runs, "suites/elementwise.yaml", "--html", history)
    return report, history


#: (page, screenshot, viewport, element to scroll to the top or "").
Shot = tuple[Path, Path, dict[str, int], str]


def _shoot(chromium: str, shots: list[Shot]) -> None:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=ARGS)
        for page_file, png, viewport, anchor in shots:
            page = browser.new_page(viewport=viewport)
            page.goto(page_file.as_uri())
            if anchor:
                page.locator(anchor).scroll_into_view_if_needed()
                page.evaluate(f"document.querySelector({anchor!r}).scrollIntoView()")
            page.screenshot(path=str(png))
            page.close()
            Image.open(png).convert("RGB").quantize(colors=256).save(png, optimize=True)
            print(f"{png}: {png.stat().st_size} bytes")
        browser.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--out", type=Path, default=Path("docs"))
    args = parser.parse_args()
    root, out = Path.cwd(), args.out.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        report, history = _pages(root, Path(tmp))
        _shoot(
            args.chromium,
            [
                (report, out / "html-report.png", {"width": 1200, "height": 760}, ""),
                (report, out / "html-report-case.png", {"width": 1200, "height": 700}, "#case-0"),
                (history, out / "history.png", {"width": 1200, "height": 700}, "#case-0"),
            ],
        )
        os.chdir(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
