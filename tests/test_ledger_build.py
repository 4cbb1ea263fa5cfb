"""The ledger built from real captures (tests/data/ledger: an H200's Inductor artifacts and ncu
rows), and its hostile inputs."""

from __future__ import annotations

import copy
import json
import lzma
import math
from pathlib import Path
from typing import Any

import ledgers as L
import pytest
from helpers import in_range

from fuseci.errors import LedgerError
from fuseci.ledger import store
from fuseci.ledger.build import build
from fuseci.ledger.launches import KernelRow
from fuseci.ledger.wrapper import parse_wrapper
from fuseci.records.fusion import METRICS, Kind, Ledger, Row, kernel_row
from fuseci.validation import Invalid

DATA = Path(__file__).parent / "data" / "ledger"
CASES = (
    "block-base", "block-break_add_norm", "block-contiguous", "block-free_break", "block-opaque",
    "swiglu-base", "swiglu-fp32", "conv-base", "conv-opaque",
)  # fmt: skip
MIB16 = 8 * 1024 * 1024 * 2  # one bf16 activation of the block: 8 x 1024 x 1024


def _json(name: str) -> Any:
    return json.loads(lzma.decompress((DATA / f"{name}.xz").read_bytes()))


@pytest.fixture(scope="module")
def rows() -> tuple[KernelRow, ...]:
    return L.kernel_rows(_json("kernels.json"))


def _capture(case: str) -> dict[str, Any]:
    return _json(f"{case}.json")


def _ledger(case: str, rows: tuple[KernelRow, ...], data: Any = None) -> Ledger:
    capture = L.capture(_capture(case) if data is None else data)
    return build(capture, in_range(rows, f"{case}.compiled"))


def _row(ledger: Ledger, kernel: str, graph: str = "0/0", nth: int = 0) -> Row:
    return [r for r in ledger.rows if r.kernel == kernel and r.graph == graph][nth]


def test_block_has_a_row_per_wrapper_call_matching_ncu(rows: tuple[KernelRow, ...]) -> None:
    ledger = _ledger("block-base", rows)
    kinds = [(r.kind, r.kernel) for r in ledger.rows]
    assert len(kinds) == 9
    assert sum(k is Kind.TRITON for k, _ in kinds) == 4
    assert [n for _, n in kinds].count("extern_kernels.addmm") == 4
    assert "torch.ops.aten._scaled_dot_product_cudnn_attention.default" in [n for _, n in kinds]
    ncu = in_range(rows, "block-base.compiled")
    assert [r.measured.kernels[0] for r in ledger.rows if r.measured] == [k.kernel for k in ncu]
    assert all(r.measured is not None and r.measured.launches == 1 for r in ledger.rows)
    assert ledger.graphs == ("0/0",) and ledger.notes == ()


def test_the_residual_add_fuses_into_the_second_norm(rows: tuple[KernelRow, ...]) -> None:
    row = _row(_ledger("block-base", rows), "triton_per_fused_add_native_layer_norm_view_1")
    by_source = {n.source for n in row.nodes}
    assert {"x", "layer_norm_1"} <= by_source
    add = next(n for n in row.nodes if n.source == "x")
    assert add.op == "aten.add.Tensor"
    assert add.line == "models32.py:25: x = x + s.proj(a.transpose(1, 2).reshape(b, t, d))"
    norm_lines = {n.line for n in row.nodes if n.source == "layer_norm_1"}
    assert norm_lines == {'models32.py:30: return x + s.fc2(F.gelu(s.fc1(s.ln2(x)), approximate="tanh"))'}
    # Reads x and the projection's output, the norm's weight and bias (1024 bf16 each); writes the
    # normed activation. The sum (add_2) is recomputed by the last add, so it is never written.
    assert row.min_bytes == MIB16 + 8192 * 1024 * 2 + 2 * 1024 * 2 + MIB16
    last = _row(_ledger("block-base", rows), "triton_poi_fused_add_view_3")
    assert "add_2" in {n.name for n in last.nodes}
    assert last.min_bytes == 4 * MIB16  # x, the projection, the MLP's output read; the sum written


def test_sdpa_reads_the_qkv_buffer_once(rows: tuple[KernelRow, ...]) -> None:
    row = _row(_ledger("block-base", rows), "torch.ops.aten._scaled_dot_product_cudnn_attention.default")
    assert {n.op for n in row.nodes} >= {"aten.select.int", "aten._scaled_dot_product_cudnn_attention.default"}
    assert row.min_bytes == 8192 * 3072 * 2 + MIB16  # q, k, v are views of one GEMM output


def test_a_graph_break_splits_the_add_from_the_norm(rows: tuple[KernelRow, ...]) -> None:
    ledger = _ledger("block-break_add_norm", rows)
    assert ledger.graphs == ("0/0", "1/0")
    add = [r for r in ledger.rows if any(n.source == "x" for n in r.nodes)]
    norm = [r for r in ledger.rows if any(n.source == "layer_norm" for n in r.nodes) and r.graph == "1/0"]
    assert [r.kernel for r in add] == ["triton_poi_fused_add_view_1"] and add[0].graph == "0/0"
    assert [r.kernel for r in norm] == ["triton_per_fused_native_layer_norm_0"]
    assert add[0].min_bytes == 3 * MIB16  # the sum is written: the next graph reads it
    assert norm[0].min_bytes == 2 * MIB16 + 2 * 1024 * 2  # and reads it again
    assert len(ledger.break_reasons) == 1 and "models32.py:27" in ledger.break_reasons[0]
    assert "User code traceback" not in ledger.break_reasons[0]
    base = _ledger("block-base", rows)
    assert ledger.floor_bytes == base.floor_bytes + 2 * MIB16  # the tensor between graphs counts at both


def test_the_fp32_break_puts_an_fp32_tensor_through_memory(rows: tuple[KernelRow, ...]) -> None:
    ledger = _ledger("swiglu-fp32", rows)
    assert ledger.graphs == ("1/0", "2/0", "3/0")
    elements = 8 * 1024 * 2048
    cast = _row(ledger, "triton_poi_fused__to_copy_0", "1/0")
    assert cast.min_bytes == elements * 2 + elements * 4
    norm = _row(ledger, "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "2/0")
    assert norm.min_bytes == elements * 4 + 2048 * 2 + elements * 2  # reads fp32: 4 bytes an element
    fused = _row(capture_ledger := _ledger("swiglu-base", rows), "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0")
    assert fused.min_bytes == elements * 2 + 2048 * 2 + elements * 2
    assert capture_ledger.floor_bytes is not None and ledger.floor_bytes is not None
    assert ledger.floor_bytes - capture_ledger.floor_bytes >= 2 * elements * 4


@pytest.mark.parametrize("case", CASES)
def test_measured_bytes_are_ncus_and_the_json_round_trip_is_exact(case: str, rows: tuple[KernelRow, ...]) -> None:
    ledger = _ledger(case, rows)
    ncu = in_range(rows, f"{case}.compiled")
    assert ledger.measured_bytes == sum(k.dram_bytes for k in ncu)
    assert sum(r.measured.launches for r in ledger.rows if r.measured) == len(ncu)
    assert all(r.kind is not Kind.UNTRACED for r in ledger.rows)
    assert all(r.min_bytes is not None and r.min_bytes > 0 for r in ledger.rows)
    text = L.dumps(ledger)
    assert L.loads(text, "x.json") == ledger
    assert L.dumps(L.loads(text, "x.json")) == text


def test_a_kernel_launched_twice_claims_its_launches_in_order(rows: tuple[KernelRow, ...]) -> None:
    ledger = _ledger("block-opaque", rows)
    first, second = (r for r in ledger.rows if r.kernel == "triton_per_fused_native_layer_norm_0")
    assert {n.source for n in first.nodes} == {"layer_norm"}
    assert {n.source for n in second.nodes} == {"layer_norm_1"}
    ids = [k.id for k in in_range(rows, "block-opaque.compiled") if k.kernel == "triton_per_fused_native_layer_norm_0"]
    dram = {k.id: k.dram_bytes for k in rows}
    assert first.measured is not None and first.measured.dram_bytes == dram[ids[0]]
    assert second.measured is not None and second.measured.dram_bytes == dram[ids[1]]
    scale = _row(ledger, "torch.ops.fuseci_probe.scale.default")
    assert scale.measured is not None and scale.measured.kernels == ("vectorized_elementwise_kernel",)


def test_layout_copies_before_a_convolution_take_the_wrappers_buffers(rows: tuple[KernelRow, ...]) -> None:
    ledger = _ledger("conv-base", rows)
    copy_in = _row(ledger, "triton_poi_fused_convolution_0")
    assert copy_in.min_bytes == 2 * 32 * 128 * 56 * 56 * 2 and "copy" in copy_in.note
    weights = _row(ledger, "triton_poi_fused_convolution_1")
    assert weights.min_bytes == 2 * 128 * 128 * 9 * 2
    assert "no shared data" in ledger.fusion_refusals


def test_fusion_refusals_are_distinct_and_numberless(rows: tuple[KernelRow, ...]) -> None:
    refusals = _ledger("block-contiguous", rows).fusion_refusals
    assert set(refusals) == {"intermediate nodes between node1 & node2", "no shared data"}


def test_kernels_no_call_claims_make_one_untraced_row(rows: tuple[KernelRow, ...]) -> None:
    # CUDA-graph replay records no per-call ranges: only the compiled region's. Its first kernel
    # left out, the launches do not follow the wrapper's order, so none is attributed by it
    # (tests/test_ledger_modes.py reads replays that do).
    ncu = in_range(rows, "block-base.compiled")[1:]
    bare = tuple(
        KernelRow(k.id, k.kernel, k.nvtx[:2], k.dram_bytes, k.global_bytes, k.l2_bytes, k.duration_ns) for k in ncu
    )
    ledger = build(L.capture(_capture("block-base")), bare)
    untraced = [r for r in ledger.rows if r.kind is Kind.UNTRACED]
    assert len(untraced) == 1 and untraced[0].measured is not None
    assert untraced[0].measured.launches == len(ncu) and "no call's range" in untraced[0].note
    assert all(r.measured is None and "no kernel" in r.note for r in ledger.rows if r.kind is not Kind.UNTRACED)
    assert ledger.measured_bytes == sum(k.dram_bytes for k in ncu)


def test_a_capture_without_provenance_still_gives_rows(rows: tuple[KernelRow, ...]) -> None:
    data = _capture("block-base")
    data["artifacts"] = [a for a in data["artifacts"] if "provenance" not in a["name"]]
    ledger = _ledger("block-base", rows, data)
    assert len(ledger.rows) == 9
    assert all(r.min_bytes is None and r.nodes == () and "cache" in r.note for r in ledger.rows)
    assert all(r.measured is not None for r in ledger.rows)  # matched by name and op, not provenance


def test_recompiles_and_symbolic_shapes_are_noted_not_fatal(rows: tuple[KernelRow, ...]) -> None:
    data = _capture("block-base")
    again = copy.deepcopy([a for a in data["artifacts"]])
    for a in again:
        a["metadata"]["frame_compile_id"] = 1
        if a["name"] == "inductor_post_grad_graph":
            a["payload"] = a["payload"].replace("bf16[8, 1024, 1024]", "bf16[s0, 1024, 1024]")
    data["artifacts"] += again
    ledger = _ledger("block-base", rows, data)
    assert ledger.graphs == ("0/0", "0/1") and any("compiled 2 times" in n for n in ledger.notes)
    assert len(ledger.rows) == 18
    dynamic = [r for r in ledger.rows if r.graph == "0/1"]
    assert dynamic[0].min_bytes is None and ledger.floor_bytes is None
    assert all(r.measured is None for r in dynamic)  # nothing ran the second compile


def test_wrapper_calls_read_and_write_their_buffers() -> None:
    code = next(a["payload"] for a in _capture("block-base")["artifacts"] if a["name"] == "inductor_output_code")
    wrapper = parse_wrapper(code, "code")
    norm = wrapper.calls[4]
    assert norm.kernel == "triton_per_fused_add_native_layer_norm_view_1"
    assert norm.handle == "triton_per_fused_add_native_layer_norm_view_1:5"
    assert norm.reads == ("arg0_1", "buf3", "arg7_1", "arg8_1") and norm.writes == (
        "buf5",
    )  # buf14 reuses buf6, the SDPA result buf5[0]
    assert norm.sources == ("linear_1", "x", "layer_norm_1")
    gemm = wrapper.calls[1]
    assert (gemm.op, gemm.writes) == ("addmm", ("buf4",)) and wrapper.sizes["buf4"] == 8192 * 3072 * 2
    assert wrapper.returns == ("buf3",)


def test_a_ledger_file_round_trips(rows: tuple[KernelRow, ...], tmp_path: Path) -> None:
    ledger = _ledger("block-base", rows)
    L.save(ledger, tmp_path / "ledger.json")
    assert store.load(tmp_path / "ledger.json") == ledger


def _broken_capture(how: str) -> Any:
    data = _capture("block-base")
    arts = data["artifacts"]
    mappings = next(a for a in arts if a["name"] == "inductor_provenance_tracking_node_mappings")
    if how == "payload":
        mappings["payload"] = mappings["payload"][:40]
    elif how == "shape":
        mappings["payload"] = json.dumps({"cppCodeToPost": {"k:1": "addmm"}})
    elif how == "metadata":
        del mappings["metadata"]["frame_id"]
    elif how == "not-text":
        mappings["payload"] = None
    elif how == "item":
        arts[1] = "oops"
    elif how == "code":
        next(a for a in arts if a["name"] == "inductor_output_code")["payload"] = "def call(:\n"
    elif how == "graph":
        next(a for a in arts if a["name"] == "inductor_post_grad_graph")["payload"] = "class <lambda>(:"
    elif how == "top":
        return ["artifacts"]
    elif how == "log":
        data["fusion_log"] = "cannot fuse"
    return data


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("payload", "artifacts[2]: the payload is not JSON"),
        ("shape", 'artifacts[2]: the payload\'s cppCodeToPost["k:1"]: expected a list, got a string "addmm"'),
        ("metadata", "artifacts[2]: its metadata's frame_id is null, not a count"),
        ("not-text", "artifacts[2].payload: expected a string, got null"),
        ("item", 'artifacts[1]: expected an object, got a string "oops"'),
        ("code", "graph 0/0's output code: the output code is not Python (line 1)"),
        ("graph", "graph 0/0's post-grad graph: the post-grad graph is not the Python Inductor prints (line 1)"),
        ("top", "expected an object, got a list"),
        ("log", 'fusion_log: expected a list, got a string "cannot fuse"'),
    ],
)
def test_a_hostile_capture_is_one_line_naming_the_place(how: str, expected: str, rows: tuple[KernelRow, ...]) -> None:
    """Its shape refused where the record is read (Invalid, which the reader puts after the
    file's name), the code in it where the ledger is built."""
    with pytest.raises((Invalid, LedgerError)) as err:
        _ledger("block-base", rows, _broken_capture(how))
    message = str(err.value)
    assert expected in message and "\n" not in message


@pytest.mark.parametrize(
    ("metrics", "expected"),
    [
        ({"dram__bytes_read.sum": None}, "dram__bytes_read.sum is null, not a finite, non-negative number"),
        ({"gpu__time_duration.sum": -1.0}, "gpu__time_duration.sum is a number -1.0, not a finite"),
        ({"l1tex__m_xbar2l1tex_read_bytes_pipe_tma.sum": math.inf}, "_tma.sum is a number Infinity, not a finite"),
        ({"launch__grid_size": True}, "launch__grid_size is a boolean true, not a launch size"),
    ],
)
def test_a_kernel_s_metrics_are_checked_as_its_row_is_made(metrics: dict[str, Any], expected: str) -> None:
    row = {**{m: 1.0 for ms in METRICS.values() for m in ms}, **metrics}
    with pytest.raises(ValueError) as err:
        kernel_row(0, "k", (), row)
    assert expected in str(err.value)
    assert kernel_row(0, "k", (), {m: 1.0 for ms in METRICS.values() for m in ms}).loads is None  # no TMA: unknown


def _edit(doc: dict[str, Any], how: str) -> str:
    if how == "kind":
        doc["ledger"]["rows"][0]["kind"] = "trition"
    elif how == "negative":
        doc["ledger"]["rows"][1]["measured"]["dram_bytes"] = -1
    elif how == "unknown":
        doc["ledger"]["rows"][0]["nodes"][0]["shape"] = [1]
    elif how == "missing":
        del doc["ledger"]["floor_bytes"]
    elif how == "newer":
        doc["format_version"] = 99
    elif how == "other":
        doc["format"] = "fuseci-run"
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("kind", "x.json: ledger.rows[0].kind: unknown row kind 'trition'; did you mean 'triton'?"),
        ("negative", "x.json: ledger.rows[1].measured.dram_bytes: -1 is below the smallest value allowed"),
        ("unknown", "x.json: ledger.rows[0].nodes[0].shape: unknown key 'shape'"),
        ("missing", "x.json: ledger"),
        ("newer", "x.json: ledger format 99 was written by a newer fuseci"),
        ("other", "x.json: not a fuseci ledger"),
        ("json", "x.json:1:2: not JSON"),
        ("twice", 'the key "ledger" appears twice'),
    ],
)
def test_a_hostile_ledger_file_is_one_line_naming_the_place(
    how: str, expected: str, rows: tuple[KernelRow, ...]
) -> None:
    text = L.dumps(_ledger("block-base", rows))
    if how == "json":
        text = "{" + text
    elif how == "twice":
        text = text.replace('"ledger": {', '"ledger": {}, "ledger": {', 1)
    else:
        text = _edit(json.loads(text), how)
    with pytest.raises(LedgerError) as err:
        L.loads(text, "x.json")
    assert expected in str(err.value) and "\n" not in str(err.value)
    if how == "missing":
        assert "floor_bytes" in str(err.value)
