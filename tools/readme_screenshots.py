"""Make the README's screenshots of the HTML reports, from the recorded reports, on any machine.

    python tools/readme_screenshots.py [--chromium /usr/bin/chromium] [--out docs]

Writes ``html-report.png``, ``html-report-case.png`` and ``history.png`` (the latter made by the
commands of docs/REPORTS.md's walkthrough), taken with a headless Chromium driven by Playwright.
Run it from the repository root.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
import tempfile
from pathlib import Path

from typer.testing import CliRunner

from fuseci.cli import app

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
#: The document whose walkthrough makes the history page.
GUIDE = Path("docs/REPORTS.md")
_WALKTHROUGH = re.compile(
    r"^### The walkthrough, from the recorded reports\n.*?```sh\n(.*?)```\n+```\n(.*?)```", re.M | re.S
)


def walkthrough(text: str) -> tuple[list[list[str]], str]:
    """docs/REPORTS.md's walkthrough: its commands (each ``fuseci``'s arguments) and the last one's output."""
    found = _WALKTHROUGH.search(text)
    if found is None:
        raise SystemExit(f"{GUIDE}: no sh block and output under '### The walkthrough, from the recorded reports'")
    commands = [shlex.split(line)[1:] for line in found.group(1).splitlines() if line.startswith("fuseci ")]
    return commands, found.group(2)


def _invoke(*args: object) -> str:
    result = CliRunner().invoke(app, [str(a) for a in args])
    if result.exit_code not in (0, 1):
        raise SystemExit(result.output)
    return result.stdout


def pages(root: Path, tmp: Path) -> tuple[Path, Path, str]:
    """The report and history pages, made in ``tmp`` as a user would, and what the last command printed."""
    for name in ("suites", "kernels", "baselines", "tests"):
        (tmp / name).symlink_to(root / name)
    commands, _ = walkthrough((root / GUIDE).read_text(encoding="utf-8"))
    os.chdir(tmp)
    report = tmp / "report.html"
    regressed = REPORTS / "elementwise-regressed.ncu-rep.xz"  # relative: the page shows no machine path
    _invoke("run", "suites/elementwise.yaml", "--from-report", regressed, "--html", report)
    printed = ""
    for args in commands:
        printed = _invoke(*args)
    return report, tmp / "history.html", printed


#: (page, screenshot, viewport, element to scroll to the top or "").
Shot = tuple[Path, Path, dict[str, int], str]


def _shoot(chromium: str, shots: list[Shot]) -> None:
    from PIL import Image
    from playwright.sync_api import sync_playwright

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
        report, history, _ = pages(root, Path(tmp))
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
