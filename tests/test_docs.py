"""The docs: every relative link leads somewhere, and what README.md shows is what fuseci does.

Links: every relative Markdown link or image in README.md and docs/*.md must name an existing
file and, for an ``#anchor`` into a Markdown file, one of its headings (as GitHub makes anchors
of them). The README's recorded-run walkthrough is run for real and its pasted output must be
there, line for line ("..." stands for lines left out), and its first suite must pass
``fuseci check``.
"""

from __future__ import annotations

import itertools
import re
import shlex
import unicodedata
from pathlib import Path

import pytest
from helpers import ROOT, write
from typer.testing import CliRunner

from fuseci.cli import app
from fuseci.config.check import check_files

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


_FENCE = re.compile(r"^(```|~~~)")
_LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")


def _prose(text: str, *, code_spans: bool = False) -> list[str]:
    """The lines outside fenced code blocks, with inline code spans blanked unless asked for."""
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line if code_spans else _CODE_SPAN.sub("", line))
    return out


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|__", "", heading.strip().lower())
    text = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LNM")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file (repeats numbered -1, -2... as GitHub does)."""
    seen: dict[str, int] = {}
    out = set()
    for line in _prose(path.read_text(encoding="utf-8"), code_spans=True):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[str]:
    """The targets of the relative links and images of a Markdown file."""
    found = [m.group(1) for line in _prose(path.read_text(encoding="utf-8")) for m in _LINK.finditer(line)]
    return [t for t in found if not re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc: Path) -> None:
    broken = []
    for target in links(doc):
        file, _, anchor = target.partition("#")
        dest = (doc.parent / file).resolve() if file else doc
        rel = dest.relative_to(ROOT).as_posix() if dest.is_relative_to(ROOT) else str(dest)
        if not dest.exists():
            broken.append(f"{target}: no such file")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with the anchor #{anchor} in {rel}")
    assert broken == [], f"{doc.relative_to(ROOT)}: {broken}"


def test_the_link_checker_sees_what_it_should(tmp_path: Path) -> None:
    page = write(
        tmp_path / "page.md",
        "# Top\n\n## Runs over time: `fuseci compare`\n\nSee [a](other.md#x), ![b](img.png), "
        "[c](#top), [d](https://example.com), `[e](not-a-link.md)`.\n\n```\n[f](in-code.md)\n```\n",
    )
    assert links(page) == ["other.md#x", "img.png", "#top"]
    assert anchors(page) == {"top", "runs-over-time-fuseci-compare"}
    assert (
        slug("Several GPUs in one host: `--gpus` and `--in-flight`")
        == "several-gpus-in-one-host---gpus-and---in-flight"
    )


def test_the_readme_links_writing_a_suite_on_its_first_screen() -> None:
    first_screen = "\n".join((ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:40])
    assert "](docs/SUITES.md#writing-a-suite)" in first_screen


def _blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced block of a Markdown text as (info string, body)."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)]


def _walkthrough() -> list[tuple[str, str]]:
    """Each README command that re-analyses a recorded report, with the output pasted after it."""
    blocks = _blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    found = []
    for (info, body), (next_info, shown) in itertools.pairwise(blocks):
        commands = [line for line in body.splitlines() if line.startswith("fuseci run") and "--from-report" in line]
        if info == "sh" and commands and not next_info:
            found.append((commands[-1], shown))
    return found


def test_the_readme_walks_through_recorded_runs() -> None:
    assert len(_walkthrough()) == 2


@pytest.mark.parametrize("command, shown", _walkthrough(), ids=["clean", "regressed"])
def test_the_readme_shows_what_fuseci_prints(
    command: str, shown: str, tmp_path: Path, in_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    args = shlex.split(command)[1:]
    for i, arg in enumerate(args[:-1]):
        if arg in ("--junit", "--json", "--markdown", "--html"):
            args[i + 1] = str(tmp_path / Path(args[i + 1]).name)
    result = CliRunner().invoke(app, [*args, "-q"])
    printed = result.stdout.splitlines()
    missing = [line for line in shown.splitlines() if line.strip() != "..." and line.rstrip() not in printed]
    assert missing == [], f"README.md shows lines that `{command}` no longer prints:\n" + "\n".join(missing)
    exit_line = next(line for line in shown.splitlines() if line.startswith("fuseci: "))
    assert exit_line.endswith(f"exit {result.exit_code}")


def test_the_readme_first_suite_passes_fuseci_check(tmp_path: Path, in_root: Path) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8").split("## Your first suite", 1)[1]
    example = next(body for info, body in _blocks(text) if info == "yaml")
    checked = check_files([write(tmp_path / "suites" / "mine.yaml", example)])
    assert [p.message for p in checked.problems] == []
    assert [s.name for s in checked.suites] == ["mine"]


def test_the_ncu_page_counts_the_metrics_fuseci_asks_for() -> None:
    from fuseci.config.quantities import ncu_metrics

    said = re.search(r"An explicit list of (\d+) metrics", (ROOT / "docs" / "NCU.md").read_text(encoding="utf-8"))
    assert said is not None and int(said.group(1)) == len(ncu_metrics())


def test_the_readmes_commands_write_only_what_git_ignores() -> None:
    import subprocess

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    written = [
        arg
        for line in re.findall(r"^fuseci run .*$", readme, re.M)
        for flag, arg in itertools.pairwise(shlex.split(line))
        if flag in ("--junit", "--html", "--json", "--markdown")
    ]
    assert written
    for path in written:
        done = subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=ROOT, check=False)
        assert done.returncode == 0, f"README.md: `{path}` is written into the checkout and not ignored"


def test_the_readmes_misspelt_suite_error_names_the_line_fuseci_prints(tmp_path: Path, monkeypatch) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    suite = next(b for b in re.findall(r"```yaml\n(.*?)```", readme, re.S) if b.startswith("suite: mine"))
    shown = next(line for line in readme.splitlines() if line.startswith("fuseci: error: suites/mine.yaml:"))
    write(tmp_path / "suites" / "mine.yaml", suite.replace('dram__bytes.sum: ">= 2x"', 'dram_bytes: ">= 2x"'))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["check", "suites/mine.yaml"])
    assert result.exit_code == 3
    assert result.stderr.splitlines()[0] == shown
