"""Ledgers built by hand for the gate's and the reporter's tests: a pre-norm transformer block in
bf16 (batch 8 × 1024 tokens × 1024, 16 heads) compiled by Inductor, with the figures ncu measured
for each of its kernels on an H200 (one process per run), and the edits the tests plant in it.

The block's source, as its nodes' lines quote it::

    14  h = self.ln1(x)
    15  q, k, v = self.qkv(h).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
    16  a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    17  x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
    19  h = self.ln2(x)
    20  h = F.gelu(self.fc1(h), approximate="tanh")
    21  return x + self.fc2(h)
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from fuseci import __version__
from fuseci.ledger import store
from fuseci.ledger.artifacts import Capture
from fuseci.ledger.artifacts import capture as capture_of
from fuseci.records.fusion import KernelRow, Kind, Ledger, Measured, Node, Provenance, Row, kernel_row
from fuseci.validation import validate


def dumps(ledger: Ledger) -> str:
    """The exact text of a ledger file (sorted keys, a trailing newline)."""
    return store.FORMAT.dumps(store.LedgerDocument(ledger, __version__).to_json())


def loads(text: str, path: Path | str) -> Ledger:
    """A ledger from a file's text."""
    return store.from_json(store.FORMAT.parse(text, path), path)


def save(ledger: Ledger, path: Path) -> None:
    """Write a ledger file."""
    path.write_text(dumps(ledger), encoding="utf-8")


def capture(data: object) -> Capture:
    """A variant's captured provenance (tests/data/ledger/<case>.json, or a harness record's), checked
    as the record's reader checks it (:class:`~fuseci.validation.Invalid` where it is not one)."""
    return capture_of(validate(Provenance, data))


def kernel_rows(data: list[dict[str, Any]]) -> tuple[KernelRow, ...]:
    """ncu's rows exported to JSON (tests/data/ledger/kernels.json), as the report reader makes them."""
    return tuple(kernel_row(r["id"], r["kernel"], tuple(r["nvtx"]), r, r.get("repeat", False)) for r in data)


MB = 1 << 20
ACT = 16 * MB  # one bf16 activation of 8 × 1024 × 1024

CODE = {
    14: "h = self.ln1(x)",
    15: "q, k, v = self.qkv(h).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)",
    16: "a = F.scaled_dot_product_attention(q, k, v, is_causal=True)",
    17: "x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))",
    19: "h = self.ln2(x)",
    20: 'h = F.gelu(self.fc1(h), approximate="tanh")',
    21: "return x + self.fc2(h)",
}


def line(n: int, shift: int = 0) -> str:
    return f"block.py:{n + shift}: {CODE[n]}"


def node(name: str, op: str, source: str, n: int, shift: int = 0) -> Node:
    return Node(name, op, source, line(n, shift))


def layer_norm(source: str, n: int, suffix: str = "", shift: int = 0) -> tuple[Node, ...]:
    ops = [
        ("convert_element_type", "prims.convert_element_type.default"),
        ("var_mean", "aten.var_mean.correction"),
        ("getitem", "getitem"),
        ("sub", "aten.sub.Tensor"),
        ("add", "aten.add.Tensor"),
        ("rsqrt", "aten.rsqrt.default"),
        ("mul", "aten.mul.Tensor"),
        ("mul_1", "aten.mul.Tensor"),
        ("add_1", "aten.add.Tensor"),
        ("convert_element_type_1", "prims.convert_element_type.default"),
        ("view", "aten.reshape.default"),
    ]
    return tuple(node(name + suffix, op, source, n, shift) for name, op in ops)


def gelu(shift: int = 0) -> tuple[Node, ...]:
    ops = [
        ("convert_element_type_13", "prims.convert_element_type.default"),
        ("mul_8", "aten.mul.Tensor"),
        ("mul_4", "aten.mul.Tensor"),
        ("add_5", "aten.add.Tensor"),
        ("tanh", "aten.tanh.default"),
        ("add_6", "aten.add.Tensor"),
        ("mul_9", "aten.mul.Tensor"),
        ("convert_element_type_14", "prims.convert_element_type.default"),
        ("view_8", "aten.reshape.default"),
    ]
    return tuple(node(name, op, "gelu", 20, shift) for name, op in ops)


def measured(kernel: str, dram: float, global_: float, l2: float, ns: float, launches: int = 1) -> Measured:
    return Measured(launches, dram, global_, l2, ns, (kernel,))


def row(graph: str, kernel: str, kind: Kind, nodes: tuple[Node, ...], m: Measured, least: int | None) -> Row:
    return Row(graph, kernel, kind, nodes, m, least)


def addmm(
    name: str, source: str, n: int, figures: tuple[float, float, float, float], least: int, shift: int = 0
) -> Row:
    nodes = (
        node(name, "aten.addmm.default", source, n, shift),
        node(f"view_{name}", "aten.reshape.default", source, n, shift),
    )
    gemm = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT"
    return row("0/0", "extern_kernels.addmm", Kind.EXTERN, nodes, measured(gemm, *figures), least)


def block(shift: int = 0) -> Ledger:
    """The block as compiled in one graph: nine calls (four cuBLAS GEMMs, cuDNN's attention, four
    Triton kernels). ``shift`` moves every line from 16 on (a line added above them)."""

    def s(n: int) -> int:
        return shift if n >= 16 else 0

    sdpa = "torch.ops.aten._scaled_dot_product_cudnn_attention.default"
    attention = (
        node("select", "aten.select.int", "q", 15),
        node("permute_1", "aten.permute.default", "permute", 15),
        node("_scaled_dot_product_cudnn_attention", "aten._scaled_dot_product_cudnn_attention.default", "a", 16, s(16)),
    )
    residual = (node("add_2", "aten.add.Tensor", "add", 17, s(17)),)
    rows = (
        row(
            "0/0",
            "triton_per_fused_native_layer_norm_0",
            Kind.TRITON,
            layer_norm("layer_norm", 14),
            measured("triton_per_fused_native_layer_norm_0", 17_299_712, 67_108_864, 33_698_432, 12_256),
            2 * ACT + 4096,
        ),
        addmm("addmm", "linear", 15, (64_210_944, 786_432, 387_729_696, 95_520), ACT + 6 * MB + 6144 + 3 * ACT),
        row(
            "0/0",
            sdpa,
            Kind.EXTERN,
            attention,
            measured(
                "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0",
                56_523_776,
                0,
                155_419_648,
                76_608,
            ),
            4 * ACT,
        ),
        addmm("addmm_1", "linear_1", 17, (19_005_184, 262_144, 111_554_656, 35_712), 2 * ACT + 2 * MB + 2048, s(17)),
        row(
            "0/0",
            "triton_per_fused_add_native_layer_norm_view_1",
            Kind.TRITON,
            residual + layer_norm("layer_norm_1", 19, "_8", s(19)),
            measured("triton_per_fused_add_native_layer_norm_view_1", 34_478_848, 83_886_080, 50_502_016, 14_656),
            4 * ACT + 4096,
        ),
        addmm(
            "addmm_2",
            "linear_2",
            20,
            (82_640_128, 1_048_576, 537_890_560, 126_720),
            ACT + 8 * MB + 8192 + 4 * ACT,
            s(20),
        ),
        row(
            "0/0",
            "triton_poi_fused_gelu_view_2",
            Kind.TRITON,
            gelu(s(20)),
            measured("triton_poi_fused_gelu_view_2", 104_893_696, 134_217_728, 134_217_728, 52_544),
            8 * ACT,
        ),
        addmm(
            "addmm_3", "linear_3", 21, (94_169_600, 262_144, 388_799_616, 115_904), 4 * ACT + 8 * MB + 2048 + ACT, s(21)
        ),
        row(
            "0/0",
            "triton_poi_fused_add_view_3",
            Kind.TRITON,
            (
                node("add_7", "aten.add.Tensor", "add_1", 21, s(21)),
                node("view_9", "aten.reshape.default", "linear_3", 21, s(21)),
            ),
            measured("triton_poi_fused_add_view_3", 53_051_648, 67_108_864, 67_108_864, 17_888),
            3 * ACT,
        ),
    )
    weights = 2 * (3 * MB + MB + 4 * MB + 4 * MB) + 4 * 4096
    return Ledger(rows=rows, floor_bytes=2 * ACT + weights, graphs=("0/0",))


def renamed(ledger: Ledger, names: dict[str, str]) -> Ledger:
    """``ledger`` with kernels renamed (the same work, other names)."""
    return replace(ledger, rows=tuple(replace(r, kernel=names.get(r.kernel, r.kernel)) for r in ledger.rows))


def noisy(ledger: Ledger, seed: int = 0) -> Ledger:
    """``ledger`` as a clean re-run measures it: library rows' DRAM bytes ±2% and L2 bytes ±0.5%,
    Inductor's kernels' DRAM bytes ±1.5% (what they read stayed in L2 or not) and L2 ±0.03%,
    times ±3%; global bytes identical. The signs alternate, the first up."""
    out = []
    for i, r in enumerate(ledger.rows):
        assert r.measured is not None
        up = 1 if (i + seed) % 2 == 0 else -1
        lib = r.kind is not Kind.TRITON
        m = r.measured
        m = replace(
            m,
            dram_bytes=round(m.dram_bytes * (1 + up * (0.02 if lib else 0.015))),
            l2_bytes=round(m.l2_bytes * (1 + up * (0.005 if lib else 0.0003))),
            duration_ns=m.duration_ns * (1 + up * 0.03),
        )
        out.append(replace(r, measured=m))
    return replace(ledger, rows=tuple(out))


def with_measured(ledger: Ledger, kernel: str, **changes: object) -> Ledger:
    """``ledger`` with the measurement of the first row of ``kernel`` changed."""
    i = next(i for i, r in enumerate(ledger.rows) if r.kernel == kernel)
    r = ledger.rows[i]
    assert r.measured is not None
    rows = list(ledger.rows)
    rows[i] = replace(r, measured=replace(r.measured, **changes))
    return replace(ledger, rows=tuple(rows))


def split_add_norm() -> Ledger:
    """A graph break between the residual add and the second norm: the add runs alone in graph
    0/0, the norm alone in graph 1/0 (figures of the real run with that break)."""
    base = block()
    fused = base.rows[4]
    add = row(
        "0/0",
        "triton_poi_fused_add_view_1",
        Kind.TRITON,
        fused.nodes[:1],
        measured("triton_poi_fused_add_view_1", 34_424_576, 50_331_648, 50_331_648, 13_760),
        3 * ACT,
    )
    norm = row(
        "1/0",
        "triton_per_fused_native_layer_norm_0",
        Kind.TRITON,
        fused.nodes[1:],
        measured("triton_per_fused_native_layer_norm_0", 17_321_984, 67_108_864, 33_698_560, 12_352),
        2 * ACT + 4096,
    )
    later = tuple(replace(r, graph="1/0") for r in base.rows[5:])
    rows = (*base.rows[:4], add, norm, *later)
    names = {
        "triton_poi_fused_gelu_view_2": "triton_poi_fused_gelu_view_1",
        "triton_poi_fused_add_view_3": "triton_poi_fused_add_view_2",
    }
    return renamed(
        replace(base, rows=rows, graphs=("0/0", "1/0"), break_reasons=("Call to `torch._dynamo.graph_break()`",)), names
    )


def with_copy() -> Ledger:
    """``q = q.contiguous()`` added on a line of its own before the attention (every later line
    moves down by one): Inductor adds a copy kernel."""
    base = block(shift=1)
    clone = row(
        "0/0",
        "triton_poi_fused_clone_4",
        Kind.TRITON,
        (
            Node("select", "aten.select.int", "q", "block.py:16: q = q.contiguous()"),
            Node("clone", "aten.clone.default", "contiguous", "block.py:16: q = q.contiguous()"),
        ),
        measured("triton_poi_fused_clone_4", 33_554_432, 33_554_432, 33_554_432, 9_100),
        2 * ACT,
    )
    return replace(base, rows=(*base.rows[:2], clone, *base.rows[2:]))
