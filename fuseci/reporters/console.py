"""The report people read in a terminal or a CI log.

Per suite: a heading with its verdict, the environment and baseline, a table of every (case,
variant) with its measurements and gains, then one block per variant that needs attention,
headed by its worst verdict, with the messages of its checks that did not pass (a split kernel
reads as one story: the inventory, then each gain it cost), then the notes. A totals line ends
the report.

Without a baseline the NEW checks are one line, not one per check. The notes that DRAM writes
read low (output still in L2) are one line per suite; ``verbose`` gives each case's. Colour only
when asked (:func:`fuseci.cli.output.colour`: a terminal, no ``NO_COLOR``); every string from a
file passes :func:`~fuseci.reporters.text.clean` before colour is added.
"""

from __future__ import annotations

import math
import shlex

from fuseci.config import names
from fuseci.judge.verdict import CaseResult, CheckKind, Comparison, Verdict, subjects
from fuseci.reporters.text import (
    UNDERCOUNT,
    attention,
    clean,
    count,
    env_line,
    gain_columns,
    totals,
    undercount_summary,
)

#: SGR colour per verdict: red for what fails the build, yellow for what needs a look, cyan for
#: what has nothing to compare with, green for what is fine.
_SGR = {
    Verdict.WRONG: "1;31",
    Verdict.REGRESSED: "1;31",
    Verdict.ERROR: "1;31",
    Verdict.INCOMPARABLE: "1;31",
    Verdict.WARN: "1;33",
    Verdict.MISSING: "36",
    Verdict.NEW: "36",
    Verdict.IMPROVED: "32",
    Verdict.PASS: "32",
}
_DIM = "2"


class _Paint:
    """ANSI colour, or none."""

    def __init__(self, on: bool) -> None:
        self.on = on

    def __call__(self, text: str, sgr: str) -> str:
        return f"\x1b[{sgr}m{text}\x1b[0m" if self.on and text else text

    def verdict(self, v: Verdict, width: int = 0) -> str:
        return self(v.value.upper().ljust(width), _SGR[v])


def _f(value: float | None, scale: float = 1.0, fmt: str = "{:.1f}") -> str:
    if value is None or math.isnan(value):
        return "-"
    return fmt.format(value / scale)


def _table(cases: tuple[CaseResult, ...]) -> list[str]:
    head = (
        "case",
        "variant",
        "launches",
        "DRAM MB",
        "x min",
        "time µs",
        "DRAM GB/s",
        "occ %",
        *(f"gain {n}" for _, n in gain_columns()),
    )
    rows: list[tuple[str, ...]] = []
    for case in cases:
        for i, v in enumerate(case.variants):
            vals = v.values
            rate = (
                (vals.get(names.DRAM_READ_RATE, math.nan) + vals.get(names.DRAM_WRITE_RATE, math.nan)) if vals else None
            )
            rows.append((
                case.case if i == 0 else "",
                v.variant,
                _f(vals.get(names.LAUNCHES), fmt="{:.0f}"),
                _f(vals.get(names.DRAM_BYTES), 1e6),
                _f(vals.get(names.BYTES_RATIO), fmt="{:.2f}"),
                _f(vals.get(names.DURATION), 1e3),
                _f(rate, 1e9, "{:.0f}"),
                _f(vals.get(names.OCC_ACHIEVED)),
                *(_f(v.gains.get(q), fmt="{:.2f}x") if v.gains else "" for q, _ in gain_columns()),
            ))  # fmt: skip
        if not case.variants:
            rows.append((case.case, "-", *("-" for _ in head[2:])))
    rows = [tuple(clean(cell) for cell in r) for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return [line(head), *(line(r) for r in rows)]


def _blocks(c: Comparison, paint: _Paint) -> list[str]:
    """One block per (case, variant) with a check that did not pass, the worst first; then one
    per planted regression caught, saying by what."""
    out: list[str] = []
    for a in attention(c):
        place = paint(clean(f"{c.suite_path}:{a.line}" if a.line else c.suite_path), _DIM)
        out.append(f"  {paint.verdict(a.verdict, 10)} {clean(a.where)}  {place}")
        # Checks without a baseline value are one line with the command that records them; a
        # value the baseline has but that was not compared (an exact counter of other kernels)
        # says why on a line of its own: recording would hide the change.
        unrecorded = [k.verdict is Verdict.NEW and k.baseline_value is None for k in a.checks]
        new = [k for k, u in zip(a.checks, unrecorded, strict=True) if u]
        for k, u in zip(a.checks, unrecorded, strict=True):
            if not u:
                out.append(f"    {paint('-', _SGR[k.verdict])} {clean(k.message)}")
        if len(new) == 1:
            out.append(f"    {paint('-', _SGR[Verdict.NEW])} {clean(new[0].message)}")
        elif new:
            command = record_command(c)
            advice = (
                f"no baseline value yet: record them with `{clean(command)}`"
                if command
                else f"no value in {clean(c.reference.name if c.reference else 'the baseline')} to compare with"
            )
            out.append(f"    {paint('-', _SGR[Verdict.NEW])} {len(new)} checks have {advice}")
        if a.passing:
            out.append(paint(f"    ({count(a.passing, 'more check', 'more checks')} pass)", _DIM))
    for s in (s for s in subjects([c]) if s.caught):
        place = paint(clean(f"{c.suite_path}:{s.line}" if s.line else c.suite_path), _DIM)
        out.append(f"  {paint('CAUGHT'.ljust(10), _SGR[Verdict.PASS])} {clean(f'{s.case}/{s.variant}')}  {place}")
        out += [
            f"    {paint('-', _SGR[Verdict.PASS])} {clean(k.message)}" for k in s.checks if k.check is CheckKind.PLANTED
        ]
    return out


def record_command(c: Comparison) -> str:
    """The command that records ``c``'s baseline from the same inputs as its run (its
    :class:`~fuseci.judge.verdict.Reference`'s); empty when its reference is another run."""
    if c.reference is None:  # read back from a results file: the suite file is all that is known
        return f"fuseci update-baselines {shlex.quote(c.suite_path)}"
    return c.reference.command


def _notes(c: Comparison, verbose: bool) -> list[str]:
    notes = []
    for case in c.cases:
        for n in case.notes:
            if verbose or not n.startswith(UNDERCOUNT):
                notes.append(f"  note: {clean(case.case)}: {clean(n)}")
    summary = undercount_summary(c)
    if summary and not verbose:
        notes.append(f"  note: {summary}; -v shows each case")
    return notes


def _suite(c: Comparison, paint: _Paint, verbose: bool) -> list[str]:
    out = [f"suite {clean(c.suite)}: {paint.verdict(c.verdict)}  {paint(clean(c.suite_path), _DIM)}"]
    if not c.env:  # the suite could not be profiled or read: its error check says why
        for case in c.cases:
            out += [f"  {paint.verdict(k.verdict, 10)} {clean(k.message)}" for k in case.checks]
        return [*out, ""]
    out.append("  " + clean(env_line(c)))
    if not c.has_baseline:
        checks = sum(1 for case in c.cases for k in case.checks if k.verdict is Verdict.NEW)
        out.append(
            f"  {paint.verdict(Verdict.NEW)}: no baseline at {clean(str(c.baseline_path))} yet, so "
            f"{count(checks, 'check')} {'has' if checks == 1 else 'have'} nothing to compare with; record one with `{clean(record_command(c) or 'fuseci update-baselines')}`"
        )
    else:
        out.append(f"  baseline {clean(str(c.baseline_path))}")
    for d in c.env_differences:
        state = "accepted" if d.accepted else paint("NOT COMPARED", _SGR[Verdict.INCOMPARABLE])
        out.append(
            clean(f"  environment differs: {d.field} baseline {d.baseline_value!r}, now {d.current!r} ") + f"({state})"
        )
    out += ["", *("  " + r for r in _table(c.cases)), ""]
    blocks = _blocks(c, paint)
    notes = _notes(c, verbose)
    if blocks:
        out += [*blocks, ""]
    if notes:
        out += [*notes, ""]
    return out


def render(comparisons: list[Comparison], *, color: bool = False, verbose: bool = False) -> str:
    """The whole console report."""
    paint = _Paint(color)
    lines: list[str] = []
    for c in comparisons:
        lines += _suite(c, paint, verbose)
    lines.append(clean(totals(comparisons)))
    return "\n".join(lines) + "\n"


def render_suite(comparison: Comparison, *, color: bool = False, verbose: bool = False) -> str:
    """One suite's part of the console report, printed as soon as the suite is judged."""
    return "\n".join(_suite(comparison, _Paint(color), verbose)) + "\n"
