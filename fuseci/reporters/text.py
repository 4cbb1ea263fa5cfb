"""Wording shared by the human-readable reporters (console and Markdown), and :func:`clean`, the one sanitiser of every
string fuseci prints or writes into a report."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len

from fuseci.config import names, quantities
from fuseci.config.model import UNFUSED
from fuseci.config.quantities import Gate
from fuseci.frames.inventory import KernelLaunch
from fuseci.judge.verdict import (
    CaseResult,
    CheckKind,
    Comparison,
    FindingCause,
    MetricDelta,
    Subject,
    Tally,
    Verdict,
    exit_code,
    subjects,
    tally,
)
from fuseci.reporters.budget import cut

#: The gains the tables show, in their order (a layout choice; their headings are the catalogue's
#: :attr:`~fuseci.config.quantities.Quantity.short`).
TABLE_GAINS: tuple[str, ...] = (names.DRAM_BYTES, names.DURATION, names.EVENT_TIME, names.LAUNCHES)


def gain_columns() -> tuple[tuple[str, str], ...]:
    """The gains shown in tables, with their column names: :data:`TABLE_GAINS`, then any other
    gain the catalogue gives a column heading."""
    shown = [
        *TABLE_GAINS,
        *(q.name for q in quantities.QUANTITIES if q.short and q.gate is Gate.GAIN and q.name not in TABLE_GAINS),
    ]
    return tuple((name, entry.short or entry.label) for name in shown if (entry := quantities.get(name)))


def columns(rows: Sequence[Sequence[str]], left: int = 2) -> list[str]:
    """``rows`` (the heading first) as columns two spaces apart, each as wide as its widest cell (rich's
    ``cell_len``), the first ``left`` aligned left, the others right, no trailing spaces (``rich.table`` is slow)."""
    widths = [max(cell_len(row[i]) for row in rows) for i in range(len(rows[0]))] if rows else []

    def cell(i: int, text: str) -> str:
        pad = " " * (widths[i] - cell_len(text))
        return text + pad if i < left else pad + text

    return ["  ".join(cell(i, c) for i, c in enumerate(row)).rstrip() for row in rows]


#: The Unicode categories :func:`clean` makes visible: controls, format characters (bidi controls,
#: zero-width characters), line and paragraph separators, lone surrogates. Each can break a line,
#: vanish or make text read as something else.
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
#: Everything but printable ASCII: the only characters whose category needs looking up.
_NOT_ASCII = re.compile("[^\x20-\x7e]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible(m: re.Match[str], keep: str) -> str:
    c = m.group()
    if c in keep or unicodedata.category(c) not in HIDDEN_CATEGORIES:
        return c
    if c in _NAMED:
        return _NAMED[c]
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def clean(text: str, keep: str = "") -> str:
    """``text`` with every character of :data:`HIDDEN_CATEGORIES` replaced by a visible escape
    (``\\n``, ``\\x1b``, ``\\u2028``).

    Strings from files fuseci reads may hold anything: printed raw, a newline would start a line
    a CI system reads as a command, an ESC would drive the terminal, a bidi control would reorder
    the line. Every string a reporter or the command line prints passes through here, so that one
    string is always one line. Backslashes are left alone; characters in ``keep`` pass (for a
    format that escapes them itself)."""
    if text.isascii() and text.isprintable():  # the common case: nothing to look up
        return text
    return _NOT_ASCII.sub(lambda m: _visible(m, keep), text)


#: The array frameworks' fingerprint fields, as :func:`env_line` names them (where a suite uses them).
FRAMEWORK_LABELS: dict[str, str] = {"torch_version": "PyTorch", "triton_version": "Triton"}


def gpu_line(e: Mapping[str, Any]) -> str:
    """One line naming the GPU, driver, CUDA and CuPy of an environment."""
    return (
        f"GPU {e.get('gpu_name', '?')} (sm_{str(e.get('compute_capability', '?')).replace('.', '')}), "
        f"driver {e.get('driver_version', '?')}, CUDA {e.get('cuda_runtime', '?')}, CuPy {e.get('cupy_version', '?')}"
    )


def env_line(c: Comparison) -> str:
    """:func:`gpu_line`, then PyTorch and Triton (where the suite uses them), ncu and its clock
    and cache control."""
    e = c.env
    frameworks = "".join(f"{label} {e[k]}, " for k, label in FRAMEWORK_LABELS.items() if e.get(k))
    return (
        f"{gpu_line(e)}, {frameworks}ncu {e.get('ncu_version', '?')}, clock-control {e.get('clock_control', '?')}, "
        f"cache-control {e.get('cache_control', '?')}"
    )


#: The verdicts whose name is a noun, so that a count of them takes a plural (``2 errors``); the
#: others read the same for any count (``1 pass``, ``8 regressed``, ``2 new``).
_NOUNS: dict[Verdict, tuple[str, str]] = {Verdict.ERROR: ("error", "errors"), Verdict.WARN: ("warning", "warnings")}


def verdict_count(verdict: Verdict, count: int, separators: bool = False) -> str:
    """``4 errors``, ``1 error``, ``8 regressed``; ``4,000 pass`` with ``separators``."""
    one, many = _NOUNS.get(verdict, (verdict.value, verdict.value))
    number = f"{count:,}" if separators else str(count)
    return f"{number} {one if count == 1 else many}"


def number(value: float | None, scale: float = 1.0, fmt: str = "{:.1f}") -> str:
    """``value`` ÷ ``scale`` as ``fmt`` writes it; ``-`` for none or NaN."""
    return "-" if value is None or math.isnan(value) else fmt.format(value / scale)


def count(n: int, one: str, many: str = "") -> str:
    """``1 check``, ``20 checks`` (``many`` when the plural is not ``one`` + s)."""
    return f"{n} {one if n == 1 else many or one + 's'}"


#: How an outcome reads after a count of subjects (``1 variant regressed``, ``2 cases in error``).
_OUTCOMES: dict[Verdict, str] = {
    Verdict.WRONG: "wrong",
    Verdict.REGRESSED: "regressed",
    Verdict.ERROR: "in error",
    Verdict.INCOMPARABLE: "incomparable",
    Verdict.WARN: "with warnings",
    Verdict.MISSING: "missing",
    Verdict.NEW: "new",
    Verdict.IMPROVED: "improved",
    Verdict.PASS: "pass",
}


def tally_text(t: Tally, separators: bool = False) -> str:
    """One count of :func:`~fuseci.judge.verdict.tally` for people: ``1 variant regressed: 8
    checks``, ``7 planted regressions caught``, ``9 variants pass: 64 checks``."""

    def n(value: int) -> str:
        return f"{value:,}" if separators else str(value)

    if not isinstance(t.outcome, Verdict):  # CAUGHT
        return f"{n(t.subjects)} planted regression{'s' if t.subjects != 1 else ''} caught"
    word = _OUTCOMES[t.outcome]
    if t.outcome is Verdict.PASS and t.subjects == 1:
        word = "passes"
    unit = t.unit if t.subjects == 1 else t.unit + "s"
    return f"{n(t.subjects)} {unit} {word}: {n(t.checks)} check{'s' if t.checks != 1 else ''}"


def totals(comparisons: list[Comparison], code: int | None = None) -> str:
    """``fuseci: 1 variant regressed: 8 checks; 9 variants pass: 64 checks; exit 1``: every variant (case, or suite
    that could not run) once, by its worst verdict, with its checks of that verdict
    (:func:`~fuseci.judge.verdict.tally`), and the exit code (the verdicts', unless the command ends with another
    ``code``: a report it could not write)."""
    summary = "; ".join(tally_text(t) for t in tally(comparisons))
    return f"fuseci: {summary or 'no checks'}; exit {exit_code(comparisons) if code is None else code}"


def relative_change(now: float, before: float) -> str:
    """``-39.6%``; a ratio of two positive values beyond float range (or a millionfold), in
    decades: ``×1e+308``."""
    ratio = now / before
    if math.isfinite(ratio) and ratio < 1e6:
        return f"{(ratio - 1) * 100:+.1f}%"
    return f"×1e{math.log10(now) - math.log10(before):+.0f}"


def _num(values: Mapping[str, float], name: str) -> float | None:
    v = values.get(name)
    return None if v is None or not math.isfinite(v) else float(v)


def measured(values: Mapping[str, float]) -> str:
    """One variant's measurements in one line: ``2 launches, DRAM 1,301.1 MB (1.62x the minimum),
    322.9 µs in ncu, 87% achieved occupancy``; empty when nothing was measured."""
    from fuseci.judge.checks import megabytes  # here: the checks import pandas, which clean() needs not

    parts = []
    launches = _num(values, names.LAUNCHES)
    if launches is not None:
        parts.append(f"{launches:.0f} launch{'es' if launches != 1 else ''}")
    dram = _num(values, names.DRAM_BYTES)
    if dram is not None:
        over = _num(values, names.BYTES_RATIO)
        parts.append(f"DRAM {megabytes(dram)}" + (f" ({over:.2f}x the minimum)" if over is not None else ""))
    duration = _num(values, names.DURATION)
    if duration is not None:
        parts.append(f"{duration / 1e3:,.1f} µs in ncu")
    event = _num(values, names.EVENT_TIME)
    if event is not None:
        parts.append(f"{event / 1e3:,.1f} µs by CUDA events")
    occupancy = _num(values, names.OCC_ACHIEVED)
    if occupancy is not None:
        parts.append(f"{occupancy:.0f}% achieved occupancy")
    return ", ".join(parts)


def kernels_line(kernels: Sequence[KernelLaunch]) -> str:
    """``fuseci_add (grid 1056 x 256 threads, 16 registers) + ...``."""
    return " + ".join(f"{k.name} ({k.grid} blocks of {k.block} threads, {k.registers} registers)" for k in kernels)


def variant_detail(case: CaseResult, variant: str) -> list[str]:
    """What a report's reader needs beside a check's message: the variant's measurements and
    kernels now and at baseline, and unfused's for the gains (unfused ÷ variant)."""
    out = []
    for v in case.variants:
        if v.variant != variant and not (v.variant == UNFUSED and variant):
            continue
        now = measured(v.values)
        if now:
            out.append(f"{v.variant} now: {now}")
        if v.kernels:
            out.append(f"{v.variant} kernels now: {kernels_line(v.kernels)}")
        before = measured(v.baseline_values)
        if before:
            out.append(f"{v.variant} at baseline: {before}")
        if v.baseline_kernels and v.baseline_kernels != v.kernels:
            out.append(f"{v.variant} kernels at baseline: {kernels_line(v.baseline_kernels)}")
    return out


#: Characters of a ledger check's message the text reports keep: it names the model's nodes and
#: kernels (six of each at most) and may quote a graph-break reason, all of them user data.
LEDGER_MESSAGE = 600


def message(k: MetricDelta) -> str:
    """A check's message as the text reports print it: a ledger check's cut to
    :data:`LEDGER_MESSAGE` characters (``… (1,204 more characters)``)."""
    return cut(k.message, LEDGER_MESSAGE) if k.check is CheckKind.LEDGER else k.message


def check_detail(k: MetricDelta) -> str:
    """The numbers of one check in one line: ``now 1.40x, baseline 2.32x (-39.6%), tolerance ±1%``."""
    parts = []
    if k.current is not None and math.isfinite(k.current):
        parts.append(f"now {k.current:.4g}")
    if k.baseline_value is not None and math.isfinite(k.baseline_value):
        parts.append(f"baseline {k.baseline_value:.4g}")
    if k.change is not None and math.isfinite(k.change):
        parts.append(f"change {k.change:+.1%}")
    if k.tolerance:
        parts.append(f"tolerance {k.tolerance}")
    return ", ".join(parts)


#: The start of the note that DRAM writes read low (:func:`fuseci.judge.checks.undercount_note`).
UNDERCOUNT = "DRAM writes undercount"
_PERCENT = re.compile(r"\((\d+)%\)")


def undercount_summary(comparison: Comparison) -> str | None:
    """The undercount notes of a suite in one line (each case's is under ``-v``), or None."""
    notes = [n for case in comparison.cases for n in case.notes if n.startswith(UNDERCOUNT)]
    if not notes:
        return None
    worst = max((int(p) for n in notes for p in _PERCENT.findall(n)), default=0)
    by = f" up to {worst}%" if worst else ""
    return (
        f"DRAM writes read{by} low in {count(len(notes), 'case')} (output still in L2 when a kernel ended, "
        "which ncu does not count; DRAM bytes and their gains read low alike)"
    )


def worst(checks: Iterable[MetricDelta]) -> Verdict:
    """The worst verdict among ``checks`` (PASS for none)."""
    return min((k.verdict for k in checks), key=lambda v: v.rank, default=Verdict.PASS)


@dataclass(frozen=True, slots=True)
class Attention:
    """The checks of one variant (or of a whole case) that did not pass: one block of a report."""

    case: str
    """Case id."""
    variant: str
    """Variant id; empty for the case's own checks."""
    line: int
    """The case's line in the suite file (0 when unknown)."""
    checks: tuple[MetricDelta, ...]
    """Its checks that did not pass, worst first."""
    passing: int
    """How many of its checks passed."""
    cause: FindingCause | None = None
    """Why, said once for the variant (None: a case's own checks, or nothing to say)."""

    @property
    def verdict(self) -> Verdict:
        """The block's verdict: its worst check's."""
        return self.checks[0].verdict

    @property
    def where(self) -> str:
        """``case/variant``, or the case alone."""
        return f"{self.case}/{self.variant}" if self.variant else self.case


def attention(c: Comparison) -> list[Attention]:
    """An :class:`Attention` per (case, variant) with a check that did not pass, worst first (then suite order);
    without a baseline NEW checks are left out (one line says everything is new)."""
    groups: dict[tuple[str, str], tuple[int, list[MetricDelta]]] = {}
    why: dict[tuple[str, str], FindingCause] = {}
    for case in c.cases:
        for k in case.checks:
            groups.setdefault((case.case, k.variant), (case.line, []))[1].append(k)
        why.update({(case.case, v.variant): v.cause for v in case.variants if v.cause is not None})
    out = []
    for (case_id, variant), (line, checks) in groups.items():
        failing = [k for k in checks if k.verdict is not Verdict.PASS]
        if not c.has_baseline:
            failing = [k for k in failing if k.verdict is not Verdict.NEW]
        if failing:
            ordered = tuple(sorted(failing, key=lambda k: k.verdict.rank))
            cause = why.get((case_id, variant)) if variant else None
            out.append(Attention(case_id, variant, line, ordered, len(checks) - len(failing), cause))
    return sorted(out, key=lambda a: a.verdict.rank)


@dataclass(frozen=True, slots=True)
class Block:
    """What a report says of one (case, variant): the checks that did not pass, and what caught
    it when it is a planted regression caught."""

    where: str
    """``case/variant``, or the case alone."""
    line: int
    """The case's line in the suite file (0 when unknown)."""
    attention: Attention | None
    """Its checks that did not pass; None for a planted regression caught with nothing else to say."""
    caught: tuple[str, ...]
    """What caught it (its planted check's message); empty unless a planted regression caught."""


def blocks(c: Comparison) -> list[Block]:
    """One :class:`Block` per :func:`attention` (a planted regression caught with warnings
    beside it said as caught), then one per planted regression caught with every check passing."""
    caught = {(s.case, s.variant): s for s in subjects([c]) if s.caught}

    def said(s: Subject | None) -> tuple[str, ...]:
        return tuple(k.message for k in s.checks if k.check is CheckKind.PLANTED) if s else ()

    out = [Block(a.where, a.line, a, said(caught.pop((a.case, a.variant), None))) for a in attention(c)]
    return out + [Block(f"{s.case}/{s.variant}", s.line, None, said(s)) for s in caught.values()]


def cause_line(cause: FindingCause) -> str:
    """``cause: code: kernels/x.py:12-30 (scale_add) changed``: a variant's cause, said once."""
    return f"cause: {cause.said()}"


#: Checks that did not pass a block shows before it leaves the rest to ``-v`` (and the HTML report).
HEADLINE = 3
#: The quantities that say what moved most plainly: bytes first, then launches.
_MOVED_BYTES = frozenset({names.DRAM_BYTES, names.BYTES_RATIO})
_BYTE_COUNTERS = frozenset({
    names.GLOBAL_LOAD_BYTES, names.GLOBAL_STORE_BYTES, names.TMA_LOAD_BYTES, names.TMA_STORE_BYTES,
    names.L2_READ_BYTES, names.L2_WRITE_BYTES, names.DRAM_READ, names.DRAM_WRITE,
})  # fmt: skip


def _information(k: MetricDelta) -> int:
    """How plainly a check says what moved, 0 the most: what the variant launched (or that it broke), its bytes
    against the minimum, its DRAM bytes, launches, other byte counters, then times and the rest."""
    if k.check in (CheckKind.INVENTORY, CheckKind.KERNELS, CheckKind.LEDGER, CheckKind.CORRECTNESS, CheckKind.CASE):
        return 0
    if k.check is CheckKind.BYTES:
        return 1
    if k.check is not CheckKind.EXPECT and k.quantity in _MOVED_BYTES:
        return 2
    if k.check is not CheckKind.EXPECT and k.quantity == names.LAUNCHES:
        return 3
    return 4 if k.quantity in _BYTE_COUNTERS else 5


def headline(checks: Sequence[MetricDelta], verbose: bool = False) -> tuple[tuple[MetricDelta, ...], int]:
    """The few of a block's checks that say most plainly what moved (:data:`HEADLINE`, failing before warnings), in
    the block's order, and how many more; every check with ``verbose``, or when only one more would be left out."""
    if verbose or len(checks) <= HEADLINE + 1:
        return tuple(checks), 0
    worst = checks[0].verdict.exit_code  # a block's checks come worst first
    ranked = sorted(
        range(len(checks)), key=lambda i: (checks[i].verdict.exit_code != worst, _information(checks[i]), i)
    )
    shown = sorted(ranked[:HEADLINE])
    return tuple(checks[i] for i in shown), len(checks) - HEADLINE


def more_failing(n: int) -> str:
    """``8 more failing checks: -v``: what a block left out, and where it is."""
    return f"{count(n, 'more failing check', 'more failing checks')}: -v"
