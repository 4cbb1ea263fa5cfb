"""Rows paired across an edit of their model source line (fuseci/ledger/match.py's second stage),
on the real captures of tests/data/ledger and on the hand-built block of tests/ledgers.py: the same
work on a rewritten line is judged as a pair with a note, never hiding a split, a merge or a new
kernel."""

from __future__ import annotations

import json
import lzma
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import ledgers as L
import pytest
from helpers import in_range

from fuseci.judge.verdict import Verdict
from fuseci.ledger.build import build
from fuseci.ledger.diff import diff
from fuseci.ledger.gate import FindingKind, LedgerVerdict, judge
from fuseci.ledger.launches import KernelRow
from fuseci.ledger.match import is_view, match, op_base, quoted
from fuseci.records.fusion import Kind, Ledger, Node, Row, diff_lines

DATA = Path(__file__).parent / "data" / "ledger"
CASES = (
    "block-base", "block-break_add_norm", "block-contiguous", "block-free_break", "block-opaque",
    "swiglu-base", "swiglu-fp32", "conv-base", "conv-opaque",
)  # fmt: skip
# The card's model (kernels/models.py): ConvBN's forward and ConvBNOpaque's, each one line.
CONV_LINE = "models.py:109: return F.silu(self.bn(self.conv(x))) + x"
OPAQUE_LINE = "models.py:169: return F.silu(opaque_scale(self.bn(self.conv(x)))) + x  # planted: blocks the fusion"
CONVOLUTION = "aten.convolution.default"


def _json(name: str) -> Any:
    return json.loads(lzma.decompress((DATA / f"{name}.xz").read_bytes()))


@pytest.fixture(scope="module")
def ncu() -> tuple[KernelRow, ...]:
    return L.kernel_rows(_json("kernels.json"))


@pytest.fixture(scope="module")
def ledger(ncu: tuple[KernelRow, ...]) -> Callable[[str], Ledger]:
    built: dict[str, Ledger] = {}

    def get(case: str) -> Ledger:
        if case not in built:
            capture = L.capture(_json(f"{case}.json"))
            built[case] = build(capture, in_range(ncu, f"{case}.compiled"))
        return built[case]

    return get


def relined(ledger: Ledger, line: Callable[[Node], str]) -> Ledger:
    """``ledger`` with each node's line replaced by ``line(node)``."""
    rows = tuple(replace(r, nodes=tuple(replace(n, line=line(n)) for n in r.nodes)) for r in ledger.rows)
    return replace(ledger, rows=rows)


def rewritten(ledger: Ledger, old: str, new: str) -> Ledger:
    """``ledger`` with every node of the line ``old`` on the line ``new`` instead."""
    return relined(ledger, lambda n: new if n.line == old else n.line)


def moved_down(line: str) -> str:
    """The line edited (a comment added) and moved down by seven lines."""
    file, number, code = line.split(":", 2)
    return f"{file}:{int(number) + 7}: {code.strip()}  # edited"


def ops(row: Row) -> set[str]:
    return {n.op for n in row.nodes if not is_view(n)}


def new_kernels(v: LedgerVerdict) -> list[str]:
    return [k for f in v.findings if f.kind is FindingKind.NEW_KERNEL for k in f.kernels]


def line_notes(v: LedgerVerdict) -> list[str]:
    return [f.message for f in v.findings if "source line" in f.message]


def test_the_opaque_plant_on_its_edited_line_pairs_the_convolution(ledger: Callable[[str], Ledger]) -> None:
    """The card: ConvBNOpaque rewrites ConvBN's only line. The convolution and its two layout
    copies are the baseline's work (paired, their bytes judged); the custom op and the re-split
    batch-norm and SiLU kernels are new, so the plant still regresses."""
    base = relined(ledger("conv-base"), lambda n: CONV_LINE)
    plant = relined(ledger("conv-opaque"), lambda n: OPAQUE_LINE)
    conv = [r.kernel for r in plant.rows if ops(r) == {CONVOLUTION}]
    assert len(conv) == 3 and any(r.kind is Kind.EXTERN for r in plant.rows if r.kernel in conv)
    m = match(base, plant)
    assert [(p.baseline.kernel, p.current.kernel) for p in m.pairs] == [(k, k) for k in conv]
    assert all(p.edited and all(a.line == CONV_LINE and b.line == OPAQUE_LINE for a, b in p.edited) for p in m.pairs)

    v = judge(base, plant)
    assert v.verdict is Verdict.REGRESSED
    rest = [r.kernel for r in plant.rows if r.kernel not in conv]
    assert new_kernels(v) == rest and not set(conv) & set(new_kernels(v))
    custom = [r for r in plant.rows if r.kind is Kind.EXTERN and any(op_base(n.op) == "scale" for n in r.nodes)]
    assert len(custom) == 1 and custom[0].kernel in rest
    assert [f.kind for f in v.regressions] == [FindingKind.NEW_KERNEL] * len(rest)
    assert line_notes(v) == [
        'conv2d\'s source line changed: models.py:109 "return F.silu(self.bn(self.conv(x))) + x" → '
        'models.py:169 "return F.silu(opaque_scale(self.bn(self.conv(..."'
    ]
    (note,) = (f for f in v.notes if f.message == line_notes(v)[0])
    assert (note.kind, note.kernels) == (FindingKind.STRUCTURAL, tuple(conv))
    # the diff no longer calls the convolution gone and new
    assert not [x for x in diff_lines(diff(base, plant)) if x.startswith("conv2d")]


def test_without_an_edit_the_plant_is_the_split_it_was(ledger: Callable[[str], Ledger]) -> None:
    v = judge(ledger("conv-base"), ledger("conv-opaque"))
    assert [f.kind for f in v.regressions] == [FindingKind.SPLIT] and not line_notes(v)
    assert all(not p.edited for p in match(ledger("conv-base"), ledger("conv-opaque")).pairs)


@pytest.mark.parametrize("case", ["block-base", "swiglu-base", "conv-base", "block-opaque", "swiglu-fp32"])
def test_each_line_rewritten_alone_passes_with_one_note(case: str, ledger: Callable[[str], Ledger]) -> None:
    base = ledger(case)
    lines = list(dict.fromkeys(n.line for r in base.rows for n in r.nodes if not is_view(n)))
    assert len(lines) >= 2
    for line in lines:
        edited = rewritten(base, line, moved_down(line))
        v = judge(base, edited)
        assert v.verdict is Verdict.PASS and not match(base, edited).regroups, (line, v.findings)
        assert line_notes(v) == [m.message for m in v.findings], (line, v.findings)
        (message,) = line_notes(v)
        assert f"{quoted(line)} → {quoted(moved_down(line))}" in message
        back = judge(edited, base)
        assert back.verdict is Verdict.PASS and len(back.findings) == 1, (line, back.findings)
        assert diff(base, edited) == [], line  # nor does the diff see a node come or go


def test_a_line_of_a_fused_row_rewritten_pairs_the_row_with_its_other_line_unchanged(
    ledger: Callable[[str], Ledger],
) -> None:
    """The batch norm's line rewritten: its kernel fuses SiLU and the residual of the next line,
    unchanged; the row pairs, and only the batch norm's nodes are said to have moved."""
    base = ledger("conv-base")
    bn = next(r for r in base.rows if len({n.line for n in r.nodes}) > 1)
    line = next(n.line for n in bn.nodes if n.source == "y")
    m = match(base, rewritten(base, line, moved_down(line)))
    (pair,) = (p for p in m.pairs if p.baseline.kernel == bn.kernel)
    assert pair.edited and {a.line for a, _ in pair.edited} == {line}
    assert len(pair.edited) == sum(1 for n in bn.nodes if n.line == line and not is_view(n))


def test_an_edit_that_adds_bytes_to_the_paired_row_regresses(ledger: Callable[[str], Ledger]) -> None:
    base = ledger("conv-base")
    line = base.rows[0].nodes[0].line
    copy = base.rows[0].kernel
    edited = rewritten(base, line, moved_down(line))
    measured = edited.rows[0].measured
    assert measured is not None
    grown = L.with_measured(edited, copy, global_bytes=measured.global_bytes + 4096)
    v = judge(base, grown)
    assert v.verdict is Verdict.REGRESSED
    (regressed,) = v.regressions
    assert regressed.kind is FindingKind.BYTES and regressed.kernels == (copy,)
    assert "global bytes rose" in regressed.message and "+4,096 bytes" in regressed.message
    assert len(line_notes(v)) == 1


@pytest.mark.parametrize("plant", CASES)
def test_editing_every_line_never_turns_a_regression_into_a_pass(plant: str, ledger: Callable[[str], Ledger]) -> None:
    """Every capture judged against every other, as recorded and with every line of the current
    one rewritten: what regressed still regresses (an edit may only cost a false alarm)."""
    every = relined(ledger(plant), lambda n: moved_down(n.line) if n.line else n.line)
    for base in CASES:
        if judge(ledger(base), ledger(plant)).verdict is Verdict.REGRESSED:
            assert judge(ledger(base), every).verdict is Verdict.REGRESSED, (base, plant)
    assert judge(ledger(plant), every).verdict is Verdict.PASS


# --- what the second stage must never do, on the hand-built block ----------------------------------------

SDPA_LINE = L.line(16)
NORM_LINE = L.line(19)


def _copy(line: str, kernel: str = "triton_poi_fused_clone_4") -> Row:
    clone = L.with_copy().rows[2]
    return replace(clone, kernel=kernel, nodes=tuple(replace(n, line=line) for n in clone.nodes))


def _with_rows(ledger: Ledger, at: int, *rows: Row) -> Ledger:
    return replace(ledger, rows=(*ledger.rows[:at], *rows, *ledger.rows[at:]))


def test_a_new_copy_on_a_known_line_is_not_a_vanished_copy_moved() -> None:
    """A copy removed with its line and another copy added on a line the baseline has: the same
    ops, but not an edit of a line: new kernel, and the old copy gone."""
    base = _with_rows(L.block(), 2, _copy("block.py:30: q = q.contiguous()"))
    now = _with_rows(L.block(), 2, _copy(SDPA_LINE))
    v = judge(base, now)
    assert new_kernels(v) == ["triton_poi_fused_clone_4"] and v.verdict is Verdict.REGRESSED
    assert not line_notes(v)


def test_a_copy_moved_to_another_file_is_not_paired() -> None:
    base = _with_rows(L.block(), 2, _copy("block.py:30: q = q.contiguous()"))
    now = _with_rows(L.block(), 2, _copy("attention.py:30: q = q.contiguous()"))
    assert new_kernels(judge(base, now)) == ["triton_poi_fused_clone_4"]
    same_file = _with_rows(L.block(), 2, _copy("block.py:31: q = q.contiguous()  # edited"))
    assert judge(base, same_file).verdict is Verdict.PASS


def test_a_new_copy_on_an_edited_line_is_never_hidden() -> None:
    """The line of a copy rewritten and a second copy of the same ops added on it: which of the
    two is the baseline's is not known, so neither pairs."""
    base = _with_rows(L.block(), 2, _copy("block.py:30: q = q.contiguous()"))
    edited = "block.py:30: q = q.contiguous().contiguous()"
    now = _with_rows(L.block(), 2, _copy(edited), _copy(edited, "triton_poi_fused_clone_5"))
    v = judge(base, now)
    assert v.verdict is Verdict.REGRESSED
    assert new_kernels(v) == ["triton_poi_fused_clone_4", "triton_poi_fused_clone_5"]
    assert not line_notes(v)


def test_a_split_on_an_edited_line_is_still_caught() -> None:
    """The second norm's line rewritten as a graph break splits it from the residual add: the norm
    runs alone, doing less than the fused row did, so it is new, not the fused row edited."""
    v = judge(L.block(), rewritten(L.split_add_norm(), NORM_LINE, moved_down(NORM_LINE)))
    assert v.verdict is Verdict.REGRESSED
    assert new_kernels(v) == ["triton_per_fused_native_layer_norm_0"]
    both = rewritten(
        rewritten(L.split_add_norm(), NORM_LINE, moved_down(NORM_LINE)), L.line(17), moved_down(L.line(17))
    )
    assert judge(L.block(), both).verdict is Verdict.REGRESSED


def test_a_split_beside_an_edited_line_is_the_same_split() -> None:
    gelu = L.line(20)
    plain = judge(L.block(), L.split_add_norm())
    v = judge(L.block(), rewritten(L.split_add_norm(), gelu, moved_down(gelu)))
    assert v.regressions == plain.regressions and v.regressions[0].kind is FindingKind.SPLIT
    assert len(line_notes(v)) == 1 and "gelu" in line_notes(v)[0]


def test_a_library_call_and_a_generated_kernel_of_the_same_ops_are_not_paired() -> None:
    """The convolution's layout copies carry its node as the library call does: a generated
    kernel is never the library call's work on an edited line."""
    line = L.line(15)
    base = L.block()
    qkv = base.rows[1]
    assert qkv.kind is Kind.EXTERN
    as_triton = replace(qkv, kernel="triton_tem_fused_addmm_0", kind=Kind.TRITON)
    now = rewritten(replace(base, rows=(base.rows[0], as_triton, *base.rows[2:])), line, moved_down(line))
    v = judge(base, now)
    assert "triton_tem_fused_addmm_0" in new_kernels(v) and v.verdict is Verdict.REGRESSED


def test_a_new_copy_on_a_known_line_beside_an_edited_copy_is_the_new_one() -> None:
    """Only rows with a line the other ledger lacks take part: the edited copy pairs, and the copy
    added on a known line is the new kernel (not 'one of two, unknown which')."""
    base = _with_rows(L.block(), 2, _copy("block.py:30: q = q.contiguous()"))
    edited = _copy("block.py:31: q = q.contiguous()  # edited")
    now = _with_rows(L.block(), 2, edited, _copy(SDPA_LINE, "triton_poi_fused_clone_5"))
    v = judge(base, now)
    assert new_kernels(v) == ["triton_poi_fused_clone_5"] and len(line_notes(v)) == 1


def test_a_node_moved_to_a_line_the_baseline_has_is_not_an_edit() -> None:
    """A copy's line edited while its multiply moved to a line the baseline already had: the same
    ops, but part of the work now comes from elsewhere in the model, so the rows do not pair."""
    copy = _copy("block.py:30: q = q.contiguous()")
    scaled = replace(copy, nodes=(*copy.nodes, Node("mul", "aten.mul.Tensor", "mul", "block.py:31: q = q * 2")))
    base = _with_rows(L.block(), 2, scaled)
    moved = (
        *_copy("block.py:32: q = q.contiguous()  # edited").nodes,
        Node("mul", "aten.mul.Tensor", "mul", SDPA_LINE),
    )
    v = judge(base, _with_rows(L.block(), 2, replace(copy, nodes=moved)))
    assert new_kernels(v) == [copy.kernel] and not line_notes(v)


def test_a_row_linked_to_a_regrouping_of_known_lines_is_left_to_it() -> None:
    """The second norm's line rewritten and the residual add also run alone (a split of the add
    from its fused row): the add's line is unchanged, so the rows stay a split, not a pair and a
    new kernel."""
    base = L.block()
    fused = base.rows[4]
    edited = rewritten(base, NORM_LINE, moved_down(NORM_LINE))
    alone = L.split_add_norm().rows[4]
    assert {n.line for n in alone.nodes} == {L.line(17)}
    v = judge(base, _with_rows(edited, 5, alone))
    assert [f.kind for f in v.regressions] == [FindingKind.SPLIT]
    assert v.regressions[0].kernels == (fused.kernel, fused.kernel, alone.kernel)
    assert not line_notes(v)
