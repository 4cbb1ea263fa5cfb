"""The ledger of forwards compiled with less to go on: a CUDA-graph replay (``mode:
reduce-overhead``: no per-call ranges, its kernels attributed by launch order), dynamic shapes
(sizes are symbols) and one frame compiled twice, from a recorded suite (H100); and the launch
order's attribution on small synthetic replays, the cases it must refuse included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ledgers as L
import pytest
from typer.testing import CliRunner

from fuseci.cli import app
from fuseci.frames import repeats
from fuseci.ledger import launches, replay
from fuseci.ledger.build import SYMBOLIC
from fuseci.ledger.launches import KernelRow, attribute
from fuseci.ledger.wrapper import Call, parse_wrapper
from fuseci.records.fusion import Kind

DATA = Path(__file__).resolve().parent / "data"
REPORT = DATA / "reports" / "compile_modes.ncu-rep.xz"
RECORD = DATA / "reports" / "compile_modes.harness.json"
SUITE = DATA / "suites" / "compile_modes.yaml"
REGION = "Torch-Compiled Region: 0/0, op_id = 2"
RUN = "## Call CompiledFxGraph None ##, op_id = 5"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each case's ledger variant of the recorded suite, as ``fuseci run --json`` writes it."""
    tmp = tmp_path_factory.mktemp("modes")
    out = tmp / "r.json"
    result = CliRunner().invoke(
        app, ["run", str(SUITE), "--from-report", str(REPORT), "--baselines", str(tmp / "b"), "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    cases = json.loads(out.read_text())["suites"][0]["cases"]
    return {c["case"]: next(v for v in c["variants"] if v.get("ledger")) for c in cases}


def _calls(case: str) -> tuple[Call, ...]:
    capture = L.capture(json.loads(RECORD.read_text())["cases"][case]["provenance"]["compiled"])
    code = capture.graphs[0].output_code
    assert code is not None
    return parse_wrapper(code, "output code").calls


def _sums_are_the_variant_s(variant: dict[str, Any]) -> None:
    rows = [r["measured"] for r in variant["ledger"]["rows"] if r["measured"]]
    values = variant["values"]
    assert sum(m["launches"] for m in rows) == values["launches"]
    assert sum(m["dram_bytes"] for m in rows) == pytest.approx(values["dram__bytes.sum"], rel=1e-9)
    assert sum(m["duration_ns"] for m in rows) == pytest.approx(values["gpu__time_duration.sum"], rel=1e-9)


def test_the_partitioned_wrapper_of_a_cuda_graph_is_read_through_its_partition() -> None:
    calls = _calls("graphs")
    kinds = "".join("t" if c.kind is Kind.TRITON else "e" for c in calls)
    assert kinds == "teeetetet"  # the pre-norm block: norm, qkv GEMM, attention, out GEMM, ...
    assert all(c.handle for c in calls)
    assert [c.kernel for c in calls] == [c.kernel for c in _calls("dynamic")]  # the same block, not replayed


def test_a_replay_s_rows_are_its_wrapper_s_calls_by_launch_order(recorded: dict[str, dict[str, Any]]) -> None:
    variant = recorded["graphs"]
    ledger = variant["ledger"]
    calls, rows = _calls("graphs"), ledger["rows"]
    traced = [r for r in rows if r["kind"] != "untraced"]
    assert [r["kernel"] for r in traced] == [c.kernel for c in calls]
    assert all(r["nodes"] and r["min_bytes"] for r in traced)
    assert any("CUDA-graph replay" in n and "launch order" in n for n in ledger["notes"])
    for r in traced:
        assert r["measured"]["launches"] == 1 and r["note"].startswith(replay.BY_ORDER), r
        if r["kind"] == "triton":
            assert r["measured"]["kernels"] == [r["kernel"]]
    # the QKV GEMM, the attention and the output GEMM share one gap: one kernel each, named for
    # its call's work (two nvjet GEMMs around cuDNN's SDPA kernel)
    gap = [r["measured"]["kernels"][0] for r in traced[1:4]]
    assert [replay.family(k, kernel=True) for k in gap] == ["GEMM", "attention", "GEMM"]
    assert gap[1].startswith("cudnn_generated_fort_native_sdpa")
    dynamic = [r["measured"]["kernels"] for r in recorded["dynamic"]["ledger"]["rows"]]
    assert [r["measured"]["kernels"] for r in traced] == dynamic  # as the same block run without graphs
    (untraced,) = [r for r in rows if r["kind"] == "untraced"]
    assert untraced["measured"]["launches"] == 1  # the input copy alone
    assert "input copies" in untraced["note"] and untraced["measured"]["kernels"] == ["multi_tensor_apply_kernel"]
    assert any(n.startswith(replay.REPLAYED.format("0/0")) for n in ledger["notes"])
    _sums_are_the_variant_s(variant)


def test_a_graph_of_symbolic_sizes_has_nodes_and_says_why_it_has_no_minimum(
    recorded: dict[str, dict[str, Any]],
) -> None:
    variant = recorded["dynamic"]
    rows = variant["ledger"]["rows"]
    assert len(rows) == len(_calls("dynamic")) and all(r["kind"] != "untraced" for r in rows)
    assert all(r["nodes"] and r["min_bytes"] is None and SYMBOLIC in r["note"] for r in rows)
    assert not any("replay" in n for n in variant["ledger"]["notes"])
    _sums_are_the_variant_s(variant)


def test_a_frame_compiled_twice_has_two_graphs_and_the_eager_cat_outside(recorded: dict[str, dict[str, Any]]) -> None:
    variant = recorded["lengths"]
    ledger = variant["ledger"]
    assert ledger["graphs"] == ["0/0", "0/1"]
    assert any("frame 0 was compiled 2 times" in n for n in ledger["notes"])
    first = [r for r in ledger["rows"] if r["graph"] == "0/0"]
    assert first and all(r["min_bytes"] for r in first)
    (untraced,) = [r for r in ledger["rows"] if r["kind"] == "untraced"]
    assert "outside any Torch-Compiled Region" in untraced["note"] and untraced["measured"]["launches"] == 1
    assert not any("replay" in r["note"] for r in ledger["rows"])
    _sums_are_the_variant_s(variant)


# The launch order's attribution on synthetic replays.


def _k(ident: int, name: str, *below: str, run: str = RUN) -> KernelRow:
    return KernelRow(ident, name, ("case.compiled", REGION, run, *below), 100.0 * (ident + 1), 0.0, 0.0, 1.0)


def _t(name: str) -> Call:
    return Call(name, Kind.TRITON, None, (), ())


def _e(name: str) -> Call:
    return Call(name, Kind.EXTERN, None, (), ())


def _ids(order: replay.Order) -> dict[int, list[int]]:
    return {i: [k.id for k in kernels] for i, kernels in order.claimed.items()}


def test_one_library_call_in_a_gap_takes_all_its_kernels() -> None:
    calls = [_e("extern_kernels.mm"), _t("a"), _e("extern_kernels.addmm"), _t("b"), _e("extern_kernels.bmm")]
    kernels = [_k(0, "gemm"), _k(1, "a"), _k(2, "gemm_main"), _k(3, "splitk_reduce"), _k(4, "b"), _k(5, "gemm")]
    found = replay.by_order(calls, kernels)
    assert isinstance(found, replay.Order) and not found.shared
    assert _ids(found) == {0: [0], 1: [1], 2: [2, 3], 3: [4], 4: [5]}


def test_a_library_call_that_launched_nothing_claims_nothing() -> None:
    found = replay.by_order([_t("a"), _e("extern_kernels.mm"), _t("b")], [_k(0, "a"), _k(1, "b")])
    assert isinstance(found, replay.Order) and _ids(found) == {0: [0], 2: [1]}


def test_a_gap_of_two_library_calls_is_left_untraced_not_guessed() -> None:
    calls = [_t("a"), _e("extern_kernels.mm"), _e("torch.ops.aten._flash_attention.default"), _t("b")]
    found = replay.by_order(calls, [_k(0, "a"), _k(1, "kernel_1"), _k(2, "kernel_2"), _k(3, "b")])  # names say nothing
    assert isinstance(found, replay.Order)
    assert _ids(found) == {0: [0], 3: [3]}
    ((where, externs, kernels),) = found.shared
    assert where == "between a and b" and externs == (1, 2) and [k.id for k in kernels] == [1, 2]


def test_library_calls_sharing_a_gap_take_one_kernel_each_where_the_names_say_so() -> None:
    sdpa = "torch.ops.aten._scaled_dot_product_cudnn_attention.default"
    calls = [_t("a"), _e("extern_kernels.addmm"), _e(sdpa), _e("extern_kernels.mm"), _t("b")]
    names = [
        "a",
        "nvjet_sm90_tst_96x128",
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop",
        "sm90_xmma_gemm_bf16",
        "b",
    ]
    found = replay.by_order(calls, [_k(i, n) for i, n in enumerate(names)])
    assert isinstance(found, replay.Order) and not found.shared
    assert _ids(found) == {0: [0], 1: [1], 2: [2], 3: [3], 4: [4]}


@pytest.mark.parametrize(
    "names",
    [
        ["nvjet_a", "splitKreduce_kernel", "nvjet_b"],  # one more kernel than calls: a split-K reduction
        ["nvjet_a", "nvjet_b"],  # as many, but the second is not attention
        ["cudnn_sdpa_fprop", "nvjet_a"],  # as many, out of the calls' order
        ["nvjet_a", "my_custom_kernel"],  # a kernel whose name says nothing
    ],
)
def test_a_shared_gap_the_names_do_not_settle_stays_untraced(names: list[str]) -> None:
    calls = [
        _t("a"),
        _e("extern_kernels.mm"),
        _e("torch.ops.aten._scaled_dot_product_flash_attention.default"),
        _t("b"),
    ]
    found = replay.by_order(calls, [_k(0, "a"), *(_k(i + 1, n) for i, n in enumerate(names)), _k(len(names) + 1, "b")])
    assert isinstance(found, replay.Order)
    assert _ids(found) == {0: [0], 3: [len(names) + 1]}
    ((_, externs, kernels),) = found.shared
    assert externs == (1, 2) and [k.kernel for k in kernels] == names


def test_a_custom_op_s_call_has_no_family() -> None:
    assert replay.family("torch.ops.fuseci_models.scale.default", kernel=False) is None
    assert replay.family("extern_kernels.convolution", kernel=False) == "convolution"
    assert replay.family("sm90_xmma_fprop_implicit_gemm_bf16", kernel=True) == "convolution"  # not a GEMM


def test_the_same_triton_kernel_twice_takes_its_launches_in_order() -> None:
    calls = [_t("norm"), _e("extern_kernels.mm"), _t("norm")]
    found = replay.by_order(calls, [_k(0, "norm"), _k(1, "gemm"), _k(2, "norm")])
    assert isinstance(found, replay.Order) and _ids(found) == {0: [0], 1: [1], 2: [2]}


@pytest.mark.parametrize(
    ("calls", "names", "said"),
    [
        ([_t("a"), _e("extern_kernels.mm"), _t("b")], ["a", "gemm"], "no launch of b (call 3"),
        ([_t("a"), _t("b")], ["a", "gemm", "b"], "1 kernel(s) (gemm) ran between a and b, where the wrapper calls no"),
        ([_t("a")], ["a", "gemm"], "ran after a (the replay's last Triton kernel), where the wrapper calls no"),
        ([_t("a"), _e("extern_kernels.mm"), _t("b"), _t("c")], ["a", "c", "b", "c"], "c ran between a and b, out of"),
        ([_e("extern_kernels.mm"), _t("a"), _t("b")], ["b", "gemm", "a", "b"], "b ran before a (the replay's first"),
    ],
)
def test_a_replay_out_of_its_wrapper_s_order_is_refused(calls: list[Call], names: list[str], said: str) -> None:
    found = replay.by_order(calls, [_k(i, n) for i, n in enumerate(names)])
    assert isinstance(found, str) and said in found, found


def test_a_replay_is_attributed_with_its_input_copies_named() -> None:
    calls = {"0/0": [_t("a"), _e("extern_kernels.mm"), _t("b")]}
    rows = [
        _k(0, "multi_tensor_apply_kernel", "aten::_foreach_copy_, op_id = 6"),
        _k(1, "a"),
        _k(2, "gemm"),
        _k(3, "b"),
        _k(4, "a", run="## Call CompiledFxGraph None ##, op_id = 9"),
        _k(5, "gemm", run="## Call CompiledFxGraph None ##, op_id = 9"),
        _k(6, "b", run="## Call CompiledFxGraph None ##, op_id = 9"),
    ]
    out = attribute(rows, calls)
    assert {k: [r.id for r in v] for k, v in out.claimed.items()} == {
        ("0/0", 0): [1, 4],
        ("0/0", 1): [2, 5],
        ("0/0", 2): [3, 6],
    }
    assert [r.id for r in out.unclaimed] == [0] and list(out.why) == [launches.COPIES.format("0/0")]
    assert out.notes[("0/0", 1)] == replay.BY_ORDER and "launch order" in out.replays["0/0"]


def test_a_replay_that_does_not_fit_stays_untraced_as_before() -> None:
    calls = {"0/0": [_t("a"), _e("extern_kernels.mm"), _t("b")]}
    rows = [_k(0, "multi_tensor_apply_kernel", "aten::_foreach_copy_, op_id = 6"), _k(1, "a"), _k(2, "gemm")]
    out = attribute(rows, calls)
    assert not out.claimed and not out.notes and [r.id for r in out.unclaimed] == [0, 1, 2]
    assert any("in no call's range" in w for w in out.why) and any("_foreach_copy_" in w for w in out.why)
    assert "do not follow its wrapper's calls (no launch of b" in out.replays["0/0"]


def test_a_graph_whose_calls_have_ranges_is_no_replay() -> None:
    """A stray kernel in no call's range of a graph whose calls ran from its wrapper (one claimed
    by its range) stays untraced: launch order is read only where no call has a range."""
    calls = {"0/0": [_t("a"), _t("b")]}
    rows = [_k(0, "a", "a, op_id = 6"), _k(1, "b")]
    out = attribute(rows, calls)
    assert [r.id for r in out.claimed[("0/0", 0)]] == [0] and ("0/0", 1) not in out.claimed
    assert [r.id for r in out.unclaimed] == [1] and not out.replays and not out.notes


def test_a_replay_of_a_graph_with_no_wrapper_stays_untraced() -> None:
    out = attribute([_k(0, "a"), _k(1, "b")], {"1/0": [_t("a"), _t("b")]})
    assert not out.claimed and len(out.unclaimed) == 2 and not out.replays
    assert list(out.why) == ["in graph 0/0's region but in no call's range (CUDA-graph replay, say)"]


PARTITIONED = """
def partition_0(args):
    arg0_1, = args
    buf0 = empty_strided_cuda((4, ), (1, ), torch.float32)
    # [Provenance debug handles] triton_poi_fused_relu_0:1
    triton_poi_fused_relu_0.run(arg0_1, buf0, 4, stream=stream0)
    buf1 = reinterpret_tensor(buf0, (2, 2), (2, 1), 0); del buf0  # reuse
    return (buf1, )

class Runner:
    def __init__(self, partitions):
        self.partitions = partitions

    def call(self, args):
        arg0_1, = args
        (buf1,) = self.partitions[0]([arg0_1])
        self.partitions[{other}]([buf1])
        # [Provenance debug handles] extern_kernels.mm:2
        buf2 = extern_kernels.mm(buf1, buf1)
        return (buf2, buf1)

runner = Runner(partitions=[partition_0,])
call = runner.call
"""


@pytest.mark.parametrize("other", ["1", "'0'", "True", "-1"])
def test_a_partition_s_calls_are_read_where_call_runs_it(other: str) -> None:
    """Partition 0 is read in its place; an index that names no listed partition runs nothing known."""
    wrapper = parse_wrapper(PARTITIONED.replace("{other}", other), "code")
    assert [(c.kernel, c.handle) for c in wrapper.calls] == [
        ("triton_poi_fused_relu_0", "triton_poi_fused_relu_0:1"),
        ("extern_kernels.mm", "extern_kernels.mm:2"),
    ]
    assert "buf0" in wrapper.calls[0].writes and wrapper.calls[1].reads == ("buf0",)  # buf1 is buf0 reused
    assert wrapper.returns == ("buf2", "buf0") and wrapper.sizes == {"buf0": 16}


def test_a_replay_s_kernels_carry_no_launch_mark_for_repeats_to_copy() -> None:
    """``repeats: once`` copies launches by their marks; a replay has none, so a record's repeats
    change nothing of it and its kernels stay ready for the launch order."""
    kernels = [repeats.Kernel({"kernel": k.kernel}, k.nvtx) for k in (_k(0, "a"), _k(1, "gemm"), _k(2, "b"))]
    assert repeats.expand(kernels, {3: (1, 1)}) == kernels
