"""The fusion ledger's gate and upgrade diff, on a transformer block's ledger built by hand
(tests/ledgers.py, with the figures of a real H200 run)."""

from __future__ import annotations

from dataclasses import replace

import ledgers as L
import pytest

from fuseci.errors import EXIT_PASS, EXIT_REGRESSION, SuiteError
from fuseci.judge.verdict import Verdict
from fuseci.ledger.diff import diff
from fuseci.ledger.gate import FindingKind, judge
from fuseci.ledger.match import Change, is_view, match, row_identity
from fuseci.records.fusion import Node, diff_lines

GELU = "triton_poi_fused_gelu_view_2"
QKV_GEMM = "extern_kernels.addmm"


def kinds(verdict) -> list[tuple[FindingKind, Verdict]]:
    return [(f.kind, f.verdict) for f in verdict.findings]


def test_a_split_is_caught_and_names_the_nodes_and_kernels() -> None:
    v = judge(L.block(), L.split_add_norm())
    assert v.verdict is Verdict.REGRESSED and v.exit_code == EXIT_REGRESSION
    (split,) = v.regressions
    assert split.kind is FindingKind.SPLIT
    assert split.message == (
        "add (block.py:17) and layer_norm_1 (block.py:19) ran in triton_per_fused_add_native_layer_norm_view_1; "
        "now in triton_poi_fused_add_view_1 + triton_per_fused_native_layer_norm_0 (+33.6 MB global, +17.3 MB DRAM)"
    )
    # its bytes are the split's: the forward's total is not reported again
    assert not [f for f in v.findings if f.kind is FindingKind.BYTES]
    notes = [f.message for f in v.notes]
    assert "2 compiled graph(s), was 1" in notes
    assert any("triton_poi_fused_gelu_view_2 → triton_poi_fused_gelu_view_1" in n for n in notes)


def test_the_merge_back_is_structural_not_a_regression() -> None:
    v = judge(L.split_add_norm(), L.block())
    assert v.verdict is Verdict.PASS and v.exit_code == EXIT_PASS
    assert (FindingKind.STRUCTURAL, Verdict.WARN) in kinds(v)
    assert any("now together in triton_per_fused_add_native_layer_norm_view_1" in f.message for f in v.notes)


def test_a_new_copy_kernel_is_caught() -> None:
    v = judge(L.block(), L.with_copy())
    assert kinds(v) == [(FindingKind.NEW_KERNEL, Verdict.REGRESSED)]
    assert v.findings[0].message.startswith(
        "new kernel triton_poi_fused_clone_4 runs contiguous (block.py:16) (+33.6 MB"
    )


def test_a_new_kernel_allowed_by_the_suite_passes_with_a_note() -> None:
    v = judge(L.block(), L.with_copy(), allow_new=("triton_poi_fused_clone_.*",))
    assert v.verdict is Verdict.PASS
    assert kinds(v) == [(FindingKind.NEW_KERNEL, Verdict.WARN)]
    assert "allowed by allow_new 'triton_poi_fused_clone_.*'" in v.findings[0].message
    # a pattern is matched against the whole name: a fragment of it allows nothing
    assert judge(L.block(), L.with_copy(), allow_new=("clone",)).verdict is Verdict.REGRESSED


def test_a_broken_allow_new_pattern_is_an_input_error() -> None:
    with pytest.raises(SuiteError, match=r"allow_new\[1\] 'triton_\(' is not a regular expression") as caught:
        judge(L.block(), L.block(), allow_new=("ok", "triton_("))
    assert caught.value.exit_code == 3


@pytest.mark.parametrize("seed", [0, 1])
def test_a_healthy_rerun_with_realistic_noise_passes(seed: int) -> None:
    v = judge(L.block(), L.noisy(L.block(), seed))
    assert v.verdict is Verdict.PASS and v.findings == ()


def test_global_bytes_are_exact_32_bytes_more_fail() -> None:
    base = L.block()
    gelu = next(r for r in base.rows if r.kernel == GELU)
    assert gelu.measured is not None
    v = judge(base, L.with_measured(L.noisy(base), GELU, global_bytes=gelu.measured.global_bytes + 32))
    (finding,) = v.findings
    assert finding.kind is FindingKind.BYTES and finding.verdict is Verdict.REGRESSED
    assert "global bytes rose from 354,680,832 bytes to 354,680,864 bytes (+32 bytes; exact)" in finding.message
    assert "triton_poi_fused_gelu_view_2 (gelu (block.py:20)) +32 bytes" in finding.message
    fewer = L.with_measured(base, GELU, global_bytes=gelu.measured.global_bytes - 32)
    assert judge(base, fewer).verdict is Verdict.PASS


def test_a_library_row_gets_the_band_never_exactness() -> None:
    base = L.block()
    gemm = base.rows[1].measured
    assert gemm is not None
    moved = L.with_measured(base, QKV_GEMM, dram_bytes=gemm.dram_bytes * 1.04, l2_bytes=gemm.l2_bytes * 1.08)
    assert judge(base, moved).verdict is Verdict.PASS
    beyond = L.with_measured(base, QKV_GEMM, l2_bytes=gemm.l2_bytes * 1.3)
    v = judge(base, beyond)
    assert v.verdict is Verdict.REGRESSED
    assert "L2 bytes rose" in v.findings[0].message and "±25% (moving floor)" in v.findings[0].message


def test_a_generated_rows_l2_bytes_are_held_to_the_catalogue_tolerance() -> None:
    base = L.block()
    gelu = next(r for r in base.rows if r.kernel == GELU).measured
    assert gelu is not None
    v = judge(base, L.with_measured(base, GELU, l2_bytes=gelu.l2_bytes * 1.01))
    (finding,) = v.findings
    assert finding.message.startswith("triton_poi_fused_gelu_view_2 (gelu (block.py:20)): L2 bytes rose")
    assert "tolerance ±0.5%" in finding.message and "DRAM 0.78x its minimum, was 0.78x" in finding.message


def test_what_l1_served_of_a_generated_row_widens_its_l2_band() -> None:
    """A LayerNorm whose loads L1 partly served (its global bytes twice its L2 bytes): that part
    moves with what else L1 held, so its band is ±0.5% and 5% of the bytes L1 served; a kernel
    whose every load reaches L2 (the GELU) keeps ±0.5%."""
    base = L.block()
    norm = base.rows[0].measured
    assert norm is not None and norm.global_bytes > norm.l2_bytes
    moved = L.with_measured(base, "triton_per_fused_native_layer_norm_0", l2_bytes=norm.l2_bytes * 1.04)
    assert judge(base, moved).verdict is Verdict.PASS
    beyond = L.with_measured(base, "triton_per_fused_native_layer_norm_0", l2_bytes=norm.l2_bytes * 1.07)
    (finding,) = judge(base, beyond).findings
    assert finding.verdict is Verdict.REGRESSED
    assert "tolerance ±5.46% (±0.5%, and 5% of the 33.4 MB that L1 served)" in finding.message
    gelu = next(r for r in base.rows if r.kernel == GELU).measured
    assert gelu is not None and gelu.global_bytes == gelu.l2_bytes
    assert judge(base, L.with_measured(base, GELU, l2_bytes=gelu.l2_bytes * 1.006)).verdict is Verdict.REGRESSED


def test_a_graph_break_is_known_in_another_checkout_and_at_another_line() -> None:
    """A baseline stored with the recording machine's path and line, against a run in another
    checkout with a line added above the break: the same break, no note; another reason is one."""
    from fuseci.ledger.artifacts import break_reason

    said = "Graph Break Reason: Encountered graph break when attempting to trace CALL: Call to `torch._dynamo.graph_break()`"
    stored = f"Graph break in user code at /home/ci/fuseci/kernels/models.py:121 {said}"
    now = break_reason(
        f"Graph break in user code at /srv/runner/_work/repo/kernels/models.py:124\n{said}\nUser code traceback:\n  x"
    )
    assert now == f"Graph break in user code at models.py:124 {said}"
    base, current = replace(L.block(), break_reasons=(stored,)), replace(L.noisy(L.block()), break_reasons=(now,))
    assert not [f for f in judge(base, current).findings if "graph break" in f.message]
    other = replace(current, break_reasons=(now.replace("graph_break()", "print()"),))
    (note,) = [f for f in judge(base, other).findings if "graph break" in f.message]
    assert note.verdict is Verdict.WARN and "at models.py:124" in note.message and "/srv/" not in note.message


def test_renamed_kernels_alone_are_structural() -> None:
    names = {GELU: "triton_poi_fused_gelu_view_7", "triton_poi_fused_add_view_3": "triton_poi_fused_add_view_8"}
    v = judge(L.block(), L.renamed(L.noisy(L.block()), names))
    assert v.verdict is Verdict.PASS
    assert kinds(v) == [(FindingKind.STRUCTURAL, Verdict.WARN)]
    assert "2 kernel(s) renamed, same nodes" in v.findings[0].message


def test_a_line_added_above_moves_no_node() -> None:
    assert judge(L.block(), L.block(shift=1)).findings == ()


def test_a_new_fusion_refusal_is_noted() -> None:
    reason = "cannot fuse buf3 with buf4: (block.py:19) numel mismatch"
    base = replace(L.block(), fusion_refusals=("old reason",))
    v = judge(base, replace(L.block(), fusion_refusals=("old reason", reason)))
    assert v.verdict is Verdict.PASS
    assert [(f.kind, f.message) for f in v.findings] == [
        (FindingKind.FUSION_REFUSAL, f"Inductor now refuses a fusion: {reason}")
    ]


def test_views_are_left_out_of_identity_and_a_clone_is_not_a_view() -> None:
    line = "block.py:16: q = q.contiguous()"
    assert is_view(Node("view", "aten.reshape.default", "", line))
    assert is_view(Node("permute", "torch.ops.aten.permute.default", "", line))
    assert not is_view(Node("clone", "aten.clone.default", "", line))
    copy = L.with_copy().rows[2]
    assert row_identity(copy) == frozenset({("block.py: q = q.contiguous()", "aten.clone.default")})
    m = match(L.block(), L.with_copy())
    assert len(m.pairs) == 9 and [g.change for g in m.regroups] == [Change.NEW]


def test_the_diff_says_which_nodes_were_fused_and_now_run_alone() -> None:
    changes = diff(L.block(), L.split_add_norm())
    assert [c.node for c in changes] == ["add (block.py:17)", "layer_norm_1 (block.py:19)"]
    lines = diff_lines(changes)
    assert lines[0] == (
        "add (block.py:17): was fused with layer_norm_1 (block.py:19) in "
        "triton_per_fused_add_native_layer_norm_view_1 (34.5 MB, 14.7 µs); "
        "now alone in triton_poi_fused_add_view_1 (34.4 MB, 13.8 µs)"
    )
    back = diff_lines(diff(L.split_add_norm(), L.block()))
    assert back[0].startswith("add (block.py:17): ran alone in triton_poi_fused_add_view_1")
    assert "now fused with layer_norm_1 (block.py:19)" in back[0]
    assert diff_lines(diff(L.block(), L.noisy(L.block()))) == ["no node of the model changed company"]


def test_an_autotuned_launch_shape_is_recorded_and_named_when_it_changes() -> None:
    """The choice Triton's autotuner made is kept with each row (its launch shapes): a change
    alone is a note naming both shapes, and a byte rise that came with it says so."""
    base = L.with_measured(L.block(), GELU, shapes=("3328x256",))
    gelu = next(r for r in base.rows if r.kernel == GELU)
    assert gelu.measured is not None
    retuned = L.with_measured(base, GELU, shapes=("12544x128",))
    v = judge(base, retuned)
    assert v.verdict is Verdict.PASS, v.findings
    (note,) = v.findings
    assert (note.kind, note.verdict) == (FindingKind.STRUCTURAL, Verdict.WARN)
    assert note.message == (
        "triton_poi_fused_gelu_view_2 (gelu (block.py:20)): launched as 3328x256, now 12544x128 (grid x block): "
        "Triton's autotuner chose another launch shape (it tunes again where the compile cache is cold: keep the "
        "caches between runs)"
    )
    grew = L.with_measured(retuned, GELU, global_bytes=gelu.measured.global_bytes + 4096)
    regressed = [f for f in judge(base, grew).findings if f.verdict is Verdict.REGRESSED]
    assert regressed and "+4,096 bytes; launched as 3328x256, now 12544x128" in regressed[0].message
    # a ledger stored before shapes were kept says nothing of them
    older = L.with_measured(L.block(), GELU, shapes=())
    assert not [f for f in judge(older, retuned).findings if "launched as" in f.message]


def test_nodes_a_graph_break_renumbered_are_the_same_nodes_in_the_diff() -> None:
    """Behind a graph break the second graph numbers its pre-grad nodes afresh (``layer_norm_1``
    becomes ``layer_norm``, ``linear_2`` and ``linear_3`` become ``linear`` and ``linear_1``):
    the diff pairs them by source line and name and says only what changed company, in the
    baseline's names."""
    base = L.block()
    renumbered = L.block()
    rows = []
    for r in renumbered.rows:
        nodes = tuple(
            replace(n, source=n.source.removesuffix("_1")) if n.source.startswith("layer_norm_1") else n
            for n in r.nodes
        )
        rows.append(replace(r, nodes=nodes))
    renumbered = replace(renumbered, rows=tuple(rows))
    assert any(n.source == "layer_norm_1" for r in base.rows for n in r.nodes)
    assert diff(base, renumbered) == []
    split = L.split_add_norm()
    rows = [
        replace(r, nodes=tuple(replace(n, source=n.source.removesuffix("_1")) for n in r.nodes)) for r in split.rows
    ]
    lines = diff_lines(diff(base, replace(split, rows=tuple(rows))))
    assert not [x for x in lines if ": new, in " in x or ": gone, was in " in x], lines
    assert any(x.startswith("layer_norm_1 (block.py:19): was fused with") for x in lines), lines
