"""The report people read in a terminal or a CI log: per suite its verdict, environment and baseline, a table of every
(case, variant), a line per fusion ledger, a block per variant that needs attention (its cause, then the few checks
that say what moved; ``verbose``: every one), the notes, and a totals line. Lines are :class:`rich.text.Text` styled
by colour only (``NO_COLOR`` leaves plain text); every string from a file passes :func:`~fuseci.reporters.text.clean`.
"""

from __future__ import annotations

import math
import shlex

from rich.text import Text

from fuseci.config import names
from fuseci.judge.verdict import CaseResult, Comparison, Verdict
from fuseci.reporters.ledger import change_lines, ledger_lines, summary_line
from fuseci.reporters.text import (
    UNDERCOUNT,
    Attention,
    blocks,
    cause_line,
    clean,
    columns,
    count,
    env_line,
    gain_columns,
    headline,
    message,
    more_failing,
    number,
    totals,
    undercount_summary,
)

#: The colour of each verdict: red for what fails the build, yellow for what needs a look, cyan
#: for what has nothing to compare with, green for what is fine.
STYLES: dict[Verdict, str] = {
    Verdict.WRONG: "red",
    Verdict.REGRESSED: "red",
    Verdict.ERROR: "red",
    Verdict.INCOMPARABLE: "red",
    Verdict.WARN: "yellow",
    Verdict.MISSING: "cyan",
    Verdict.NEW: "cyan",
    Verdict.IMPROVED: "green",
    Verdict.PASS: "green",
}
#: The colour of a place (a suite file and line), quieter than the text around it.
PLACE = "bright_black"


def _verdict(v: Verdict, width: int = 0) -> Text:
    return Text(v.value.upper().ljust(width), STYLES[v])


def _place(path: str, line: int = 0) -> Text:
    return Text(clean(f"{path}:{line}" if line else path), PLACE)


def _bullet(v: Verdict, message: str) -> Text:
    return Text.assemble("    ", ("-", STYLES[v]), " ", clean(message))


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
                number(vals.get(names.LAUNCHES), fmt="{:.0f}"),
                number(vals.get(names.DRAM_BYTES), 1e6),
                number(vals.get(names.BYTES_RATIO), fmt="{:.2f}"),
                number(vals.get(names.DURATION), 1e3),
                number(rate, 1e9, "{:.0f}"),
                number(vals.get(names.OCC_ACHIEVED)),
                *(number(v.gains.get(q), fmt="{:.2f}x") if v.gains else "" for q, _ in gain_columns()),
            ))  # fmt: skip
        if not case.variants:
            rows.append((case.case, "-", *("-" for _ in head[2:])))
    return columns([head, *(tuple(clean(cell) for cell in r) for r in rows)])


def _blocks(c: Comparison, verbose: bool) -> list[Text]:
    """One block per :func:`~fuseci.reporters.text.blocks`: what needs attention, then what was caught."""
    out: list[Text] = []
    for b in blocks(c):
        verdict = b.attention.verdict if b.attention else Verdict.PASS
        head = Text("CAUGHT".ljust(10), STYLES[Verdict.PASS]) if b.caught else _verdict(verdict, 10)
        out.append(Text.assemble("  ", head, " ", clean(b.where), "  ", _place(c.suite_path, b.line)))
        out += [_bullet(Verdict.PASS, said) for said in b.caught]
        if b.attention is not None and b.attention.cause is not None:
            out.append(Text("    " + clean(cause_line(b.attention.cause))))
        if b.attention is not None:
            out += _checks(c, b.attention, verbose)
    return out


def _checks(c: Comparison, a: Attention, verbose: bool) -> list[Text]:
    """A block's checks that did not pass (:func:`~fuseci.reporters.text.headline`), how many more,
    then how many passed; checks without a baseline value are one line saying how to record them."""
    unrecorded = [k.verdict is Verdict.NEW and k.baseline_value is None for k in a.checks]
    new = [k for k, u in zip(a.checks, unrecorded, strict=True) if u]
    shown, more = headline([k for k, u in zip(a.checks, unrecorded, strict=True) if not u], verbose)
    out = [_bullet(k.verdict, message(k)) for k in shown]
    if len(new) == 1:
        out.append(_bullet(Verdict.NEW, message(new[0])))
    elif new:
        command = record_command(c)
        advice = (
            f"no baseline value yet: record them with `{command}`"
            if command
            else f"no value in {c.reference.name if c.reference else 'the baseline'} to compare with"
        )
        out.append(_bullet(Verdict.NEW, f"{len(new)} checks have {advice}"))
    if more:
        out.append(Text(f"    ({more_failing(more)})", PLACE))
    if a.passing:
        out.append(Text(f"    ({count(a.passing, 'more check', 'more checks')} pass)", PLACE))
    return out


def _ledgers(c: Comparison, verbose: bool) -> list[Text]:
    """One line per variant's fusion ledger; ``verbose`` adds its rows and what changed since its baseline's."""
    out: list[Text] = []
    for case in c.cases:
        for v in case.variants:
            if v.ledger is None:
                continue
            out.append(Text(clean(f"  ledger {case.case}/{v.variant}: {summary_line(v.ledger)}")))
            if not verbose:
                continue
            out += [Text("    " + line) for line in ledger_lines(v.ledger)]
            if v.baseline_ledger is not None:
                changes, left = change_lines(v.ledger_changes)
                out.append(Text("    since the baseline's ledger:"))
                out += [Text("      " + line) for line in changes]
                if left:
                    out.append(Text(f"      and {left:,} more changes", PLACE))
    return out


def record_command(c: Comparison) -> str:
    """The command that records ``c``'s baseline from the same inputs as its run (its
    :class:`~fuseci.judge.verdict.Reference`'s); empty when its reference is another run."""
    if c.reference is None:  # read back from a results file: the suite file is all that is known
        return f"fuseci update-baselines {shlex.quote(c.suite_path)}"
    return c.reference.command


def _notes(c: Comparison, verbose: bool) -> list[str]:
    notes = [f"  note: {clean(n)}" for n in c.notes]
    for case in c.cases:
        for n in case.notes:
            if verbose or not n.startswith(UNDERCOUNT):
                notes.append(f"  note: {clean(case.case)}: {clean(n)}")
    summary = undercount_summary(c)
    if summary and not verbose:
        notes.append(f"  note: {summary}; -v shows each case")
    return notes


def suite_report(c: Comparison, *, verbose: bool = False) -> list[Text]:
    """One suite's part of the console report, printed as soon as the suite is judged."""
    out = [Text.assemble(f"suite {clean(c.suite)}: ", _verdict(c.verdict), "  ", _place(c.suite_path))]
    if not c.env:  # the suite could not be profiled or read: its error check says why
        for case in c.cases:
            out += [Text.assemble("  ", _verdict(k.verdict, 10), " ", clean(k.message)) for k in case.checks]
        return [*out, Text()]
    out.append(Text("  " + clean(env_line(c))))
    if not c.has_baseline:
        checks = sum(1 for case in c.cases for k in case.checks if k.verdict is Verdict.NEW)
        command = record_command(c) or "fuseci update-baselines"
        out.append(
            Text.assemble(
                "  ",
                _verdict(Verdict.NEW),
                clean(
                    f": no baseline at {c.baseline_path} yet, so {count(checks, 'check')} "
                    f"{'has' if checks == 1 else 'have'} nothing to compare with; record one with `{command}`"
                ),
            )
        )
    else:
        out.append(Text(f"  baseline {clean(str(c.baseline_path))}"))
    for d in c.env_differences:
        state = Text("accepted") if d.accepted else Text("NOT COMPARED", STYLES[Verdict.INCOMPARABLE])
        differs = clean(f"  environment differs: {d.field} baseline {d.baseline_value!r}, now {d.current!r} ")
        out.append(Text.assemble(differs, "(", state, ")"))
    out += [Text(), *(Text("  " + r) for r in _table(c.cases)), Text()]
    for part in (_ledgers(c, verbose), _blocks(c, verbose), [Text(n) for n in _notes(c, verbose)]):
        if part:
            out += [*part, Text()]
    return out


def report(comparisons: list[Comparison], *, verbose: bool = False, code: int | None = None) -> list[Text]:
    """The whole console report, line by line; its last line says the exit code (the verdicts',
    unless the command ends with another ``code``: a report it could not write)."""
    lines = [line for c in comparisons for line in suite_report(c, verbose=verbose)]
    return [*lines, Text(clean(totals(comparisons, code)))]


def render(comparisons: list[Comparison], *, verbose: bool = False) -> str:
    """The whole console report as plain text."""
    return "".join(line.plain + "\n" for line in report(comparisons, verbose=verbose))
