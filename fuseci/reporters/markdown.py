"""GitHub-flavoured Markdown for a job summary (``$GITHUB_STEP_SUMMARY``).

Per suite: a heading with its verdict, the environment, the baseline, any environment
differences, a table of the fusion gains of every (case, fused variant) with the worst verdict
of its checks, and a list of every check that did not pass with its message. A totals line
ends the document.

Everything that comes from outside this module (ids, paths, messages, environment values) is
escaped so that it can neither break the table nor inject HTML. GitHub refuses a step summary
over 1 MiB; a document over ``limit`` bytes loses its check lists first, then table rows, both
from the end, and says so in its last line.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from fuseci.config import names
from fuseci.config.model import UNFUSED
from fuseci.judge.verdict import CaseResult, Comparison, Verdict
from fuseci.reporters.text import (
    GAIN_COLUMNS,
    UNDERCOUNT,
    attention,
    clean,
    env_line,
    totals,
    undercount_summary,
    worst,
)

#: The most bytes GitHub accepts in one step's summary.
STEP_SUMMARY_LIMIT = 1024 * 1024

_TABLE_HEAD = (
    "| case | variant | " + " | ".join(f"{names.LABELS[q]} gain" for q, _ in GAIN_COLUMNS) + " | verdict |",
    "|---|---|" + "---:|" * len(GAIN_COLUMNS) + "---|",
)

# Backslash first so that the escapes added after it are not escaped again. `&`, `<` and `>`
# become entities: no HTML tag or entity can come through. `|` would end a table cell; the
# others would start code, emphasis, links or strikethrough.
_BACKSLASHED = re.compile(r"([\\`*\[\]|~])")
_EDGE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")  # intraword `_` is literal in GFM
_NEWLINE = re.compile(r"\r\n|\r|\n")


def escape(text: str) -> str:
    """``text`` as literal Markdown inline text, safe in a table cell; newlines become ``<br>``,
    other control characters escapes (:func:`~fuseci.reporters.text.clean`)."""
    text = _BACKSLASHED.sub(r"\\\1", text)
    text = _EDGE_UNDERSCORE.sub(r"\\_", text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return clean(_NEWLINE.sub("<br>", text))


def code(text: str) -> str:
    """``text`` as a Markdown code span, outside tables (where ``|`` would still end a cell)."""
    text = clean(_NEWLINE.sub(" ", text))
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def inline(text: str) -> str:
    """A message as Markdown: what it quotes in backticks (a command) as code, the rest escaped."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: all of it is text
        return escape(text)
    return "".join(code(p) if i % 2 else escape(p) for i, p in enumerate(parts) if p or not i % 2)


def _icon(verdict: Verdict) -> str:
    match verdict:
        case Verdict.WRONG | Verdict.REGRESSED:
            return "❌"
        case Verdict.ERROR | Verdict.INCOMPARABLE | Verdict.WARN:
            return "⚠️"
        case Verdict.MISSING | Verdict.NEW:
            return "ℹ️"
        case Verdict.IMPROVED | Verdict.PASS:
            return "✅"


def _verdict(verdict: Verdict) -> str:
    return f"{_icon(verdict)} {verdict.value.upper()}"


def _gain(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.2f}x"


def _rows(case: CaseResult) -> list[str]:
    """One row per fused variant. A gain is unfused ÷ variant, so checks of ``unfused`` and of
    the whole case count in every row's verdict."""
    variants = [v.variant for v in case.variants if v.variant != UNFUSED]
    variants += [k.variant for k in case.checks if k.variant and k.variant != UNFUSED]
    gains = {v.variant: v.gains for v in case.variants}
    rows = []
    for variant in dict.fromkeys(variants) or ("",):
        checks = [k for k in case.checks if k.variant in (variant, "", UNFUSED)]
        g = gains.get(variant, {})
        cells = (
            escape(case.case),
            escape(variant) or "-",
            *(_gain(g.get(q)) for q, _ in GAIN_COLUMNS),
            _verdict(worst(checks)),
        )
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def _bullets(c: Comparison) -> tuple[str, ...]:
    """One bullet per (case, variant) with a check that did not pass, headed by its worst
    verdict, its checks' messages nested under it (:func:`~fuseci.reporters.text.attention`)."""
    out: list[str] = []
    for a in attention(c):
        out.append(f"- {_icon(a.verdict)} **{a.verdict.value.upper()}** {escape(a.where)}")
        out += [f"  - {inline(k.message)}" for k in a.checks]
    return tuple(out)


def _notes(c: Comparison) -> tuple[str, ...]:
    notes = [
        f"- note {escape(case.case)}: {inline(n)}"
        for case in c.cases
        for n in case.notes
        if not n.startswith(UNDERCOUNT)
    ]
    summary = undercount_summary(c)
    if summary:
        notes.append(f"- note: {escape(summary)}")
    return tuple(notes)


@dataclass(frozen=True, slots=True)
class _Section:
    """One suite's lines, in the parts that truncation drops separately."""

    head: tuple[str, ...]
    """Heading, environment, baseline, differences: always kept."""
    rows: tuple[str, ...]
    """Table body."""
    bullets: tuple[str, ...]
    """Checks that did not pass."""

    def lines(self, rows: int, bullets: int) -> list[str]:
        """The section with its first ``rows`` rows and ``bullets`` bullets."""
        out = [*self.head, ""]
        if rows:
            out += [*_TABLE_HEAD, *self.rows[:rows], ""]
        if bullets:
            out += [*self.bullets[:bullets], ""]
        return out


def _section(c: Comparison) -> _Section:
    head = [f"## {_icon(c.verdict)} {escape(c.suite)}: **{c.verdict.value.upper()}**", ""]
    bullets = _bullets(c) + _notes(c)
    if not c.env:  # the suite could not be profiled or read: its error check says why
        head += [f"Suite {code(c.suite_path)} could not be profiled or read:", "", *bullets]
        return _Section(tuple(head), (), ())
    head.append(f"Suite {code(c.suite_path)} · {escape(env_line(c))}")
    head.append("")
    if c.has_baseline and c.baseline_path:
        head.append(f"Baseline {code(c.baseline_path)}")
    else:
        where = f" at {code(c.baseline_path)}" if c.baseline_path else ""
        new = sum(1 for case in c.cases for k in case.checks if k.verdict is Verdict.NEW)
        head.append(
            f"No baseline{where} yet, so {new} checks have nothing to compare with: record one with "
            f"{code('fuseci update-baselines ' + c.suite_path)}"
        )
    if c.env_differences:
        head += ["", "Environment differs from the baseline's:", ""]
        for d in c.env_differences:
            state = "accepted" if d.accepted else "**not compared**"
            head.append(
                f"- {escape(d.field)}: baseline {escape(repr(d.baseline_value))}, now {escape(repr(d.current))} ({state})"
            )
    return _Section(tuple(head), tuple(row for case in c.cases for row in _rows(case)), bullets)


def _totals(comparisons: list[Comparison]) -> str:
    return f"**{totals(comparisons)}**"


def _document(sections: list[_Section], dropped: int, totals: str, limit: int) -> str:
    """The document without the last ``dropped`` bullets, then (all bullets gone) rows."""
    n_bullets = sum(len(s.bullets) for s in sections)
    drop_bullets, drop_rows = min(dropped, n_bullets), max(0, dropped - n_bullets)
    lines: list[str] = []
    keep_bullets, keep_rows = n_bullets - drop_bullets, sum(len(s.rows) for s in sections) - drop_rows
    for s in sections:
        rows, bullets = min(keep_rows, len(s.rows)), min(keep_bullets, len(s.bullets))
        keep_rows, keep_bullets = keep_rows - rows, keep_bullets - bullets
        lines += s.lines(rows, bullets)
    lines.append(totals)
    if dropped:
        lines += ["", _note(limit, drop_bullets, drop_rows)]
    return "\n".join(lines) + "\n"


def _note(limit: int, bullets: int, rows: int, cut: bool = False) -> str:
    parts = [f"{bullets} line{'s' if bullets != 1 else ''} of check messages"]
    if rows:
        parts.append(f"{rows} table row{'s' if rows != 1 else ''}")
    if cut:
        parts.append("the end of the document")
    left_out = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
    return (
        f"*Truncated to the {limit}-byte limit of a step summary: left out {left_out}. "
        "The JSON report (`fuseci run --json FILE`) has everything.*"
    )


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def _clip(text: str, limit: int) -> str:
    """At most ``limit`` bytes of ``text``, cut at a character boundary."""
    return text.encode("utf-8")[: max(limit, 0)].decode("utf-8", "ignore")


def render(comparisons: list[Comparison], limit: int = STEP_SUMMARY_LIMIT) -> str:
    """The Markdown document, at most ``limit`` bytes in UTF-8."""
    sections = [_section(c) for c in comparisons]
    totals = _totals(comparisons)
    text = _document(sections, 0, totals, limit)
    if _size(text) <= limit:
        return text
    # Each drop removes a line of at least two bytes, so the size falls as more is dropped
    # (give or take a digit of the note): the smallest count that fits is found by bisection.
    droppable = sum(len(s.bullets) + len(s.rows) for s in sections)
    lo, hi = 0, droppable
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        if _size(_document(sections, mid, totals, limit)) <= limit:
            hi = mid
        else:
            lo = mid
    text = _document(sections, hi, totals, limit)
    if _size(text) <= limit:
        return text
    # Even the headings do not fit (a huge error message, a tiny limit): cut at a line.
    n_bullets = sum(len(s.bullets) for s in sections)
    tail = f"{totals}\n\n{_note(limit, n_bullets, droppable - n_bullets, cut=True)}\n"
    body = "".join(line + "\n" for s in sections for line in s.lines(0, 0))
    room = limit - _size(tail)
    if room < 0:
        return _clip(tail, limit)
    body = _clip(body, room)
    return body[: body.rfind("\n") + 1] + tail
