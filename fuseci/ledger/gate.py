"""A ledger judged against its baseline's: one :class:`Finding` per problem, and a verdict.

Bands (:func:`_rules`): global bytes are exact; L2 bytes get the catalogue's tolerance (its moving floor on library
rows, scheduled at run time), plus :data:`L1_SERVED` of a generated row's loads L1 served; DRAM bytes, moved by what
the kernel before left in L2, the moving floor. A total's allowance is the sum of its rows' (band times baseline)."""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import chain
from operator import attrgetter

from fuseci.config import names, quantities
from fuseci.config.policy import Band, Direction, Tolerance, parse_tolerance
from fuseci.errors import EXIT_PASS, EXIT_REGRESSION, SuiteError
from fuseci.judge.verdict import Verdict
from fuseci.ledger.artifacts import reason_key
from fuseci.ledger.match import Change, Matching, Regroup, labels, match, op_base, quoted
from fuseci.records.fusion import Kind, Ledger, Measured, Row

#: The text of a band that is a quantity's moving floor.
_MOVING = "moving floor"
#: How far the bytes L1 served of a generated row's loads may move, relative to them
#: (docs/BENCHMARKS.md, "Which counters repeat").
L1_SERVED = 0.05
#: The text of a band widened by what L1 served (:attr:`Rule.served`) starts with this.
_SERVED = "served: "
#: Names listed in one message before "and N more".
_LISTED = 6


class FindingKind(enum.Enum):
    """What a finding is about."""

    SPLIT = "split"
    NEW_KERNEL = "new kernel"
    BYTES = "bytes"
    STRUCTURAL = "structural"
    FUSION_REFUSAL = "fusion refusal"


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem or note of a ledger against its baseline's."""

    kind: FindingKind
    verdict: Verdict
    """``REGRESSED``, or ``WARN`` for a note."""
    message: str
    """One line naming the nodes (by model line) and the kernels."""
    kernels: tuple[str, ...] = ()
    """The kernels it is about, baseline's first."""
    nodes: tuple[str, ...] = ()
    """The nodes it is about, as :func:`fuseci.ledger.match.label` names them."""


@dataclass(frozen=True, slots=True)
class LedgerVerdict:
    """Every finding of a ledger against its baseline's."""

    findings: tuple[Finding, ...]
    """Regressions first, then notes, each in the order of the forward."""

    @property
    def verdict(self) -> Verdict:
        """``REGRESSED`` if any finding regressed, else ``PASS`` (notes or not)."""
        return Verdict.REGRESSED if self.regressions else Verdict.PASS

    @property
    def regressions(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.verdict is Verdict.REGRESSED)

    @property
    def notes(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.verdict is not Verdict.REGRESSED)

    @property
    def exit_code(self) -> int:
        """1 on a regression, else 0."""
        return EXIT_REGRESSION if self.regressions else EXIT_PASS


@dataclass(frozen=True, slots=True)
class Rule:
    """How far one counter of a row may grow against its baseline."""

    label: str
    """What messages call it (``global bytes``)."""
    counter: str
    """The catalogue's quantity it stands for (its unit in messages, its tolerances)."""
    read: Callable[[Measured], float] = field(compare=False)
    """The counter's value of a row's measurement."""
    generated: Tolerance
    """For Inductor's own kernels."""
    library: Tolerance
    """For extern and untraced rows."""
    served: Callable[[Measured], float] | None = field(default=None, compare=False)
    """The part of the counter L1 served instead, which a generated row's band adds
    :data:`L1_SERVED` of; None where no cache stands between."""

    def tolerance(self, old: Sequence[Row], new: Sequence[Row]) -> Tolerance:
        """The band of the baseline's rows ``old`` against the current ``new``: the library's where
        any is a library row, else the generated band widened by :attr:`served`."""
        if any(r.kind is not Kind.TRITON for r in (*old, *new)):
            return self.library
        base, served = _total(old, self.read), _total(old, self.served) if self.served else 0.0
        if served <= 0.0 or base <= 0.0 or self.generated.relative is None:
            return self.generated
        relative = round(self.generated.relative + L1_SERVED * served / base, 4)
        text = f"{self.generated}, and {L1_SERVED:.0%} of the {self.show(served)} that L1 served"
        return Tolerance(f"{_SERVED}{text}", relative)

    def show(self, value: float) -> str:
        return quantities.show(self.counter, value, exact=self.generated.relative == 0.0)


def _floor(name: str) -> Tolerance:
    entry = quantities.get(name)
    return Tolerance(_MOVING, entry.moving_floor if entry else 0.0)


def _default(name: str) -> Tolerance:
    entry = quantities.get(name)
    return parse_tolerance(entry.default if entry and entry.default else "exact")


def _rules() -> tuple[Rule, ...]:
    """The catalogue's bands (see the module docstring)."""
    moving, exact = _floor(names.L2_READ_BYTES), _default(names.GLOBAL_LOAD_BYTES)
    return (
        Rule("global bytes", names.GLOBAL_LOAD_BYTES, _global, exact, exact),
        Rule("DRAM bytes", names.DRAM_BYTES, _dram, moving, moving),
        Rule("L2 bytes", names.L2_READ_BYTES, _l2, _default(names.L2_READ_BYTES), moving, _l1_served),
    )


_global: Callable[[Measured], float] = attrgetter("global_bytes")
_dram: Callable[[Measured], float] = attrgetter("dram_bytes")
_l2: Callable[[Measured], float] = attrgetter("l2_bytes")


def _l1_served(m: Measured) -> float:
    """Bytes the SMs asked for that never reached L2: L1 hits of loads (stores go through to L2)."""
    return max(0.0, m.global_bytes - m.l2_bytes)


def _listed(items: Sequence[str], joiner: str = ", ") -> str:
    shown = joiner.join(items[:_LISTED])
    return f"{shown} and {len(items) - _LISTED} more" if len(items) > _LISTED else shown


def _nodes(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(items) <= 1:
        return "".join(items) or "no traced graph node"
    if len(items) > _LISTED:
        return _listed(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


def _kernels(rows: Sequence[Row]) -> str:
    return _listed([r.kernel for r in rows], " + ")


def _labels(rows: Sequence[Row]) -> tuple[str, ...]:
    return labels(n for r in rows for n in r.nodes)


def _total(rows: Iterable[Row], read: Callable[[Measured], float]) -> float:
    return math.fsum(read(r.measured) for r in rows if r.measured is not None)


def _signed(rule: Rule, delta: float) -> str:
    return f"{'+' if delta >= 0 else '-'}{rule.show(abs(delta))}"


def _bytes_change(old: Sequence[Row], new: Sequence[Row]) -> str:
    """`` (+33.6 MB global, +17.3 MB DRAM)``: what the rows ``new`` moved more than ``old``."""
    parts = []
    for name, read in (("global", _global), ("DRAM", _dram)):
        delta = _total(new, read) - _total(old, read)
        parts.append(f"{'+' if delta >= 0 else '-'}{quantities.show(names.DRAM_BYTES, abs(delta))} {name}")
    return f" ({', '.join(parts)})"


def _compile(allow_new: Sequence[str]) -> tuple[re.Pattern[str], ...]:
    out = []
    for i, pattern in enumerate(allow_new):
        if not isinstance(pattern, str):
            raise SuiteError(f"allow_new[{i}] is {type(pattern).__name__}, not a kernel-name pattern; write a string")
        try:
            out.append(re.compile(pattern))
        except re.error as exc:
            raise SuiteError(
                f"allow_new[{i}] {pattern[:200]!r} is not a regular expression ({exc}); write one like "
                "'triton_poi_fused_clone_.*'"
            ) from exc
    return tuple(out)


def _regroup_finding(group: Regroup, allowed: Sequence[re.Pattern[str]]) -> list[Finding]:
    """What one regrouping of rows says."""
    old, new = group.baseline, group.current
    kernels = tuple(r.kernel for r in (*old, *new))
    nodes = _labels(new if group.change is Change.CHANGED else old)
    match group.change:
        case Change.SPLIT:
            message = f"{_nodes(nodes)} ran in {_kernels(old)}; now in {_kernels(new)}{_bytes_change(old, new)}"
            return [Finding(FindingKind.SPLIT, Verdict.REGRESSED, message, kernels, nodes)]
        case Change.NEW:
            return [_new_kernel(row, allowed) for row in new]
        case Change.MERGED:
            message = (
                f"{_nodes(nodes)} ran in {_kernels(old)}; now together in {_kernels(new)}{_bytes_change(old, new)}"
            )
        case Change.CHANGED:
            message = f"{_kernels(old)} now runs as {_kernels(new)}, with other nodes: {_nodes(nodes)}"
        case Change.GONE:
            message = f"{_kernels(old)} ({_nodes(nodes)}) no longer runs{_bytes_change(old, new)}"
    return [Finding(FindingKind.STRUCTURAL, Verdict.WARN, message, kernels, nodes)]


def _new_kernel(row: Row, allowed: Sequence[re.Pattern[str]]) -> Finding:
    nodes = labels(row.nodes)
    message = f"new kernel {row.kernel} runs {_nodes(nodes)}{_bytes_change((), (row,))}; the baseline has none like it"
    by = next((p for p in allowed if p.fullmatch(row.kernel[:1000])), None)
    if by is None:
        return Finding(FindingKind.NEW_KERNEL, Verdict.REGRESSED, message, (row.kernel,), nodes)
    message += f"; allowed by allow_new {by.pattern!r}"
    return Finding(FindingKind.NEW_KERNEL, Verdict.WARN, message, (row.kernel,), nodes)


@dataclass(frozen=True, slots=True)
class _Unit:
    """Rows judged together: a pair, or a merged or changed group."""

    old: tuple[Row, ...]
    new: tuple[Row, ...]

    @property
    def name(self) -> str:
        before, now = _kernels(self.old), _kernels(self.new)
        nodes = _nodes(_labels(self.new))
        return f"{now} ({nodes})" if before == now else f"{now} (was {before}; {nodes})"


def _bytes_findings(
    baseline: Ledger, current: Ledger, matching: Matching, reported: Sequence[Regroup]
) -> list[Finding]:
    """Each counter of the forward's total, then of each row, against its band."""
    units = [_Unit((p.baseline,), (p.current,)) for p in matching.pairs]
    units += [_Unit(g.baseline, g.current) for g in matching.regroups if g.change in (Change.MERGED, Change.CHANGED)]
    units = [u for u in units if all(r.measured is not None for r in (*u.old, *u.new))]
    out = []
    for rule in _rules():
        grew: list[tuple[_Unit, float, float, Tolerance]] = []
        allowance = 0.0
        for u in units:
            tol = rule.tolerance(u.old, u.new)
            before, now = _total(u.old, rule.read), _total(u.new, rule.read)
            allowance += (tol.relative or 0.0) * before
            if tol.classify(before, now, Direction.LOWER_IS_BETTER) is Band.WORSE:
                grew.append((u, before, now, tol))
        was, total = _total(baseline.rows, rule.read), _total(current.rows, rule.read)
        explained = math.fsum(_total(g.current, rule.read) - _total(g.baseline, rule.read) for g in reported)
        if total - was - explained > allowance:
            out.append(_total_finding(rule, was, total, allowance, grew))
            continue
        out += [_row_finding(rule, *g) for g in grew]
    return out


def _total_finding(
    rule: Rule, was: float, total: float, allowance: float, grew: Sequence[tuple[_Unit, float, float, Tolerance]]
) -> Finding:
    band = "exact" if allowance == 0 else f"its rows' bands allow {_signed(rule, allowance)}"
    where = [f"{u.name} {_signed(rule, now - before)}{_shapes(u)}" for u, before, now, _ in grew]
    by = f"; in {_listed(where)}" if where else ""
    message = f"the forward's {rule.label} rose from {rule.show(was)} to {rule.show(total)} ({_signed(rule, total - was)}; {band}){by}"
    kernels = tuple(r.kernel for u, *_ in grew for r in u.new)
    nodes = tuple(dict.fromkeys(x for u, *_ in grew for x in _labels(u.new)))
    return Finding(FindingKind.BYTES, Verdict.REGRESSED, message, kernels, nodes)


def _band(tol: Tolerance) -> str:
    """``±0.5%``, ``±25% (moving floor)``, ``±4.16% (±0.5%, and 5% of the 49.6 MB that L1 served)``."""
    if tol.text == _MOVING:
        return f"{tol} ({_MOVING})"
    if tol.text.startswith(_SERVED):
        return f"{tol} ({tol.text.removeprefix(_SERVED)})"
    return str(tol)


def _row_finding(rule: Rule, unit: _Unit, before: float, now: float, tol: Tolerance) -> Finding:
    message = (
        f"{unit.name}: {rule.label} rose from {rule.show(before)} to {rule.show(now)} ({_signed(rule, now - before)}; "
        f"tolerance {_band(tol)}){_ratio(unit)}{_shapes(unit)}"
    )
    return Finding(FindingKind.BYTES, Verdict.REGRESSED, message, tuple(r.kernel for r in unit.new), _labels(unit.new))


def _shape_change(old: Sequence[Row], new: Sequence[Row]) -> str:
    """``launched as 3328x256, now 12544x128 (grid x block): ...`` where both sides recorded their
    launch shapes and they differ, else ""."""
    was = tuple(dict.fromkeys(x for r in old if r.measured is not None for x in r.measured.shapes))
    now = tuple(dict.fromkeys(x for r in new if r.measured is not None for x in r.measured.shapes))
    if not was or not now or was == now:
        return ""
    why = (
        "Triton's autotuner chose another launch shape (it tunes again where the compile cache is cold: keep "
        "the caches between runs)"
        if all(r.kind is Kind.TRITON for r in (*old, *new))
        else "another launch shape was chosen"
    )
    return f"launched as {', '.join(was)}, now {', '.join(now)} (grid x block): {why}"


def _shapes(unit: _Unit) -> str:
    """:func:`_shape_change` of a unit, as a clause of a finding (``; launched as ...``)."""
    change = _shape_change(unit.old, unit.new)
    return f"; {change}" if change else ""


def _ratio(unit: _Unit) -> str:
    """``; 1.25x its minimum, was 1.02x`` where both sides know their minimum."""
    ratios = []
    for rows in (unit.old, unit.new):
        least = sum(r.min_bytes or 0 for r in rows)
        if not least or any(r.min_bytes is None for r in rows):
            return ""
        ratios.append(_total(rows, _dram) / least)
    return f"; DRAM {ratios[1]:.2f}x its minimum, was {ratios[0]:.2f}x"


def _structure_notes(baseline: Ledger, current: Ledger, matching: Matching) -> list[Finding]:
    note = partial(Finding, FindingKind.STRUCTURAL, Verdict.WARN)
    out = []
    renamed = [(p.baseline.kernel, p.current.kernel) for p in matching.pairs if p.baseline.kernel != p.current.kernel]
    if renamed:
        pairs = _listed([f"{a} → {b}" for a, b in renamed])
        out.append(note(f"{len(renamed)} kernel(s) renamed, same nodes: {pairs}", tuple(chain(*renamed))))
    for p in matching.pairs:
        change = _shape_change((p.baseline,), (p.current,))
        if change:
            nodes = labels(p.current.nodes)
            out.append(note(f"{p.current.kernel} ({_nodes(nodes)}): {change}", (p.current.kernel,), nodes))
    for edit in matching.line_edits:  # same work paired across an edit of its line
        names = tuple(dict.fromkeys((n.source or op_base(n.op))[:200] for n in edit.nodes))
        whose = f"{names[0]}'s source line" if len(names) == 1 else f"the source line of {_nodes(names)}"
        out.append(note(f"{whose} changed: {quoted(edit.was)} → {quoted(edit.now)}", edit.kernels, labels(edit.nodes)))
    if len(baseline.graphs) != len(current.graphs):
        out.append(note(f"{len(current.graphs)} compiled graph(s), was {len(baseline.graphs)}"))
    known = {reason_key(r) for r in baseline.break_reasons}
    for reason in dict.fromkeys(r for r in current.break_reasons if reason_key(r) not in known):
        out.append(note(f"a graph break the baseline did not have: {reason}"))
    return out


def judge(baseline: Ledger, current: Ledger, allow_new: Sequence[str] = ()) -> LedgerVerdict:
    """``current`` judged against ``baseline``: splits, new kernels (unless ``allow_new``, regular expressions each
    matched against the whole name, allows them) and bytes grown beyond their band regress; structural changes that
    moved no bytes and new fusion refusals are noted (``WARN``).

    Raises:
        SuiteError: a pattern of ``allow_new`` is not a regular expression.
    """
    allowed = _compile(allow_new)
    matching = match(baseline, current)
    findings: list[Finding] = []
    for group in matching.regroups:
        findings += _regroup_finding(group, allowed)
    # A split's or a new kernel's bytes are its own finding's (or allowed): not the total's again.
    reported = [g for g in matching.regroups if g.change in (Change.SPLIT, Change.NEW)]
    findings += _bytes_findings(baseline, current, matching, reported)
    findings += _structure_notes(baseline, current, matching)
    known = set(baseline.fusion_refusals)
    for reason in dict.fromkeys(r for r in current.fusion_refusals if r not in known):
        findings.append(Finding(FindingKind.FUSION_REFUSAL, Verdict.WARN, f"Inductor now refuses a fusion: {reason}"))
    return LedgerVerdict(tuple(sorted(findings, key=lambda f: f.verdict is not Verdict.REGRESSED)))
