"""GitHub-flavoured Markdown for a job summary (``$GITHUB_STEP_SUMMARY``) and a pull-request comment (``--markdown``):
the totals line first and last, a section per suite, worst first. Data is inert text cut at :data:`MAX_TEXT`
(:func:`escape`). A document over its limit loses, from the end, the rows that pass, then the check lists, then the
other rows, and says so in its last line."""

from __future__ import annotations

import re
from dataclasses import dataclass

from fuseci.config import quantities
from fuseci.config.model import UNFUSED
from fuseci.errors import EXIT_PASS
from fuseci.judge.verdict import CaseResult, Comparison, Verdict, subjects
from fuseci.reporters.budget import cut
from fuseci.reporters.text import (
    UNDERCOUNT,
    blocks,
    cause_line,
    clean,
    count,
    env_line,
    gain_columns,
    headline,
    message,
    more_failing,
    number,
    undercount_summary,
    worst,
)
from fuseci.reporters.text import totals as text_totals

#: The most bytes GitHub accepts in one step's summary.
STEP_SUMMARY_LIMIT = 1024 * 1024
#: The most bytes of the file ``--markdown`` writes: under GitHub's 65,536 characters of a
#: comment, with room for the comment job's marker and link.
COMMENT_LIMIT = 60_000
#: The most characters of one string from data (a message, a path, a kernel name) a document shows.
MAX_TEXT = 1000


def _table_head() -> tuple[str, str]:
    columns = gain_columns()
    return (
        "| case | variant | " + " | ".join(f"{quantities.label(q)} gain" for q, _ in columns) + " | verdict |",
        "|---|---|" + "---:|" * len(columns) + "---|",
    )


# Markup characters, backslash first so that the escapes added after it are not escaped again.
_BACKSLASHED = re.compile(r"([\\`*\[\]|~])")
_EDGE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")  # intraword `_` is literal in GFM
# What GitHub makes live even in rendered text (a mention, `#123`, `GH-123`, `www.`, `://`):
# a zero-width space breaks each where it starts.
_LIVE = re.compile(r"@|#(?=[0-9])|(?i:gh-)(?=[0-9])|(?i:www)(?=\.)|(?<=[A-Za-z0-9])(?=://)")
_ZERO_WIDTH_SPACE = "&#8203;"
#: A dollar sign in an element of its own, as GitHub documents it outside a formula (``$x$``).
_DOLLAR = "<span>$</span>"


def _cut(text: str) -> str:
    """At most :data:`MAX_TEXT` characters of ``text``, saying how many more there were."""
    return text if len(text) <= MAX_TEXT else cut(text, MAX_TEXT - 40)  # 40: room for the count


def escape(text: str) -> str:
    """``text`` as literal Markdown inline text, safe in a table cell and inert: no markup, HTML,
    mention, reference, link or formula; newlines and other control characters shown as escapes
    (:func:`~fuseci.reporters.text.clean`); cut at :data:`MAX_TEXT` characters."""
    text = _BACKSLASHED.sub(r"\\\1", clean(_cut(text)))
    text = _EDGE_UNDERSCORE.sub(r"\\_", text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _LIVE.sub(lambda m: m.group() + _ZERO_WIDTH_SPACE, text).replace("$", _DOLLAR)


def code(text: str) -> str:
    """``text`` as an inert Markdown code span (not in tables: ``|`` would still end a cell), control characters
    shown as escapes, cut at :data:`MAX_TEXT` characters."""
    text = clean(_cut(text))
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def inline(text: str) -> str:
    """A message as Markdown: what it quotes in backticks (a command) as code, the rest escaped;
    cut at :data:`MAX_TEXT` characters as a whole."""
    text = _cut(text)  # the parts below are shorter: not cut again
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


def _rows(case: CaseResult, caught: frozenset[tuple[str, str]]) -> list[tuple[Verdict, bool, str]]:
    """A row per fused variant with its verdict and whether it is a caught planted regression (in ``caught``); checks
    of ``unfused`` and of the whole case count in every row's verdict (a gain is unfused ÷ variant)."""
    variants = [v.variant for v in case.variants if v.variant != UNFUSED]
    variants += [k.variant for k in case.checks if k.variant and k.variant != UNFUSED]
    gains = {v.variant: v.gains for v in case.variants}
    rows = []
    columns = gain_columns()
    for variant in dict.fromkeys(variants) or ("",):
        verdict = worst(k for k in case.checks if k.variant in (variant, "", UNFUSED))
        planted = (case.case, variant) in caught and verdict.rank >= Verdict.WARN.rank
        g = gains.get(variant, {})
        cells = (
            escape(case.case),
            escape(variant) or "-",
            *(number(g.get(q), fmt="{:.2f}x") for q, _ in columns),
            f"{_CAUGHT} CAUGHT" if planted else f"{_icon(verdict)} {verdict.value.upper()}",
        )
        rows.append((verdict, planted, "| " + " | ".join(cells) + " |"))
    return rows


#: The mark of a planted regression that was caught.
_CAUGHT = "🎯"


def _bullets(c: Comparison) -> tuple[str, ...]:
    """One bullet per :func:`~fuseci.reporters.text.blocks`, headed by its worst verdict, with its
    cause and the few checks that say what moved (:func:`~fuseci.reporters.text.headline`) nested."""
    out: list[str] = []
    for b in blocks(c):
        verdict = b.attention.verdict if b.attention else Verdict.PASS
        head = f"{_CAUGHT} **CAUGHT**" if b.caught else f"{_icon(verdict)} **{verdict.value.upper()}**"
        out.append(f"- {head} {escape(b.where)}")
        out += [f"  - {inline(said)}" for said in b.caught]
        if b.attention is not None and b.attention.cause is not None:
            out.append(f"  - *{inline(cause_line(b.attention.cause))}*")
        shown, more = headline(b.attention.checks if b.attention else ())
        out += [f"  - {inline(message(k))}" for k in shown]
        if more:
            out.append(f"  - *{escape(more_failing(more))} (or the HTML report)*")
    return tuple(out)


def _notes(c: Comparison) -> tuple[str, ...]:
    notes = [f"- note: {inline(n)}" for n in c.notes] + [
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

    verdict: Verdict
    """The suite's verdict: the worst suite comes first."""
    head: tuple[str, ...]
    """Heading, environment, baseline, differences: always kept."""
    rows: tuple[str, ...]
    """Table rows that did not pass, the worst first."""
    bullets: tuple[str, ...]
    """Checks that did not pass, then notes."""
    passing: tuple[str, ...]
    """Table rows that pass, collapsed."""

    def lines(self, rows: int, bullets: int, passing: int) -> list[str]:
        """The section with its first ``rows`` rows, ``bullets`` bullets and ``passing`` passing rows."""
        out = [*self.head, ""]
        if rows:
            out += [*_table_head(), *self.rows[:rows], ""]
        if bullets:
            out += [*self.bullets[:bullets], ""]
        if passing:
            shown = f"{passing} of {len(self.passing)} rows pass" if passing < len(self.passing) else None
            out += [
                f"<details><summary>✅ {shown or count(passing, 'row passes', 'rows pass')}</summary>",
                "",
                *_table_head(),
                *self.passing[:passing],
                "",
                "</details>",
                "",
            ]
        return out


def _section(c: Comparison) -> _Section:
    head = [f"## {_icon(c.verdict)} {escape(c.suite)}: **{c.verdict.value.upper()}**", ""]
    bullets = _bullets(c) + _notes(c)
    if not c.env:  # the suite could not be profiled or read (its error check says why), or was not measured
        if c.verdict.exit_code == EXIT_PASS:  # fuseci ab: unchanged or removed; `fuseci check`: a valid file
            said = [f"- {inline(k.message)}" for case in c.cases for k in case.checks]
            head += [f"Suite {code(c.suite_path)} was not measured:", "", *said, *_notes(c)]
        else:
            head += [f"Suite {code(c.suite_path)} could not be profiled or read:", "", *bullets]
        return _Section(c.verdict, tuple(head), (), (), ())
    head += [f"Suite {code(c.suite_path)} · {escape(env_line(c))}", ""]
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
    caught = frozenset((s.case, s.variant) for s in subjects([c]) if s.caught)
    rows = [row for case in c.cases for row in _rows(case, caught)]
    # Rows that did not pass, the worst first, then the planted regressions caught; stable.
    shown = sorted((r for r in rows if r[0] is not Verdict.PASS or r[1]), key=lambda r: (r[0].rank, r[1]))
    return _Section(
        c.verdict,
        tuple(head),
        tuple(text for _, _, text in shown),
        bullets,
        tuple(text for verdict, planted, text in rows if verdict is Verdict.PASS and not planted),
    )


#: The parts of sections a document over its limit leaves out, in this order, each from the end.
_DROPPED_FIRST = ("passing", "bullets", "rows")


def _kept(sections: list[_Section], dropped: int) -> list[dict[str, int]]:
    """How many of each part every section keeps when ``dropped`` lines are left out: the parts in
    the order of :data:`_DROPPED_FIRST`, each from the last section's end (sections are worst first)."""
    kept = [{part: len(getattr(s, part)) for part in _DROPPED_FIRST} for s in sections]
    for part in _DROPPED_FIRST:
        for k in reversed(kept):
            taken = min(dropped, k[part])
            k[part] -= taken
            dropped -= taken
    return kept


def _document(sections: list[_Section], dropped: int, totals: str, limit: int) -> str:
    """The document without ``dropped`` lines (:func:`_kept`)."""
    lines = [totals, ""]
    kept = _kept(sections, dropped)
    for s, k in zip(sections, kept, strict=True):
        lines += s.lines(k["rows"], k["bullets"], k["passing"])
    lines.append(totals)
    if dropped:
        left = {
            part: sum(len(getattr(s, part)) for s in sections) - sum(k[part] for k in kept) for part in _DROPPED_FIRST
        }
        lines += ["", _note(limit, left)]
    return "\n".join(lines) + "\n"


def _note(limit: int, left: dict[str, int], cut: bool = False) -> str:
    parts = []
    if left["passing"]:
        parts.append(count(left["passing"], "passing table row"))
    if left["bullets"]:
        parts.append(count(left["bullets"], "line") + " of check messages")
    if left["rows"]:
        parts.append(count(left["rows"], "other table row"))
    if cut:
        parts.append("the end of the document")
    left_out = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
    return (
        f"*Truncated to the {limit}-byte limit: left out {left_out}, the least severe first. "
        "The JSON report (`fuseci run --json FILE`) has everything.*"
    )


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def _clip(text: str, limit: int) -> str:
    """At most ``limit`` bytes of ``text``, cut at a character boundary."""
    return text.encode("utf-8")[: max(limit, 0)].decode("utf-8", "ignore")


def render(comparisons: list[Comparison], limit: int = COMMENT_LIMIT) -> str:
    """The Markdown document, at most ``limit`` bytes in UTF-8 (default: what a pull-request
    comment shows whole)."""
    sections = sorted((_section(c) for c in comparisons), key=lambda s: s.verdict.rank)  # stable
    totals = f"**{text_totals(comparisons)}**"
    text = _document(sections, 0, totals, limit)
    if _size(text) <= limit:
        return text
    # Each drop removes a line of at least two bytes, so the size falls as more is dropped
    # (give or take a digit of the note): the smallest count that fits is found by bisection.
    droppable = sum(len(getattr(s, part)) for s in sections for part in _DROPPED_FIRST)
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
    # Even the headings do not fit (a huge number of suites, a tiny limit): cut at a line, the
    # totals line first and last.
    left = {part: sum(len(getattr(s, part)) for s in sections) for part in _DROPPED_FIRST}
    top, tail = f"{totals}\n\n", f"{totals}\n\n{_note(limit, left, cut=True)}\n"
    room = limit - _size(top) - _size(tail)
    if room < 0:
        return _clip(tail, limit)
    body = _clip("".join(line + "\n" for s in sections for line in s.lines(0, 0, 0)), room)
    return top + body[: body.rfind("\n") + 1] + tail
