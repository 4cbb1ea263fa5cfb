"""The ledger's bytes above the minimum, by cause: requested bytes (LSU and TMA) on the recorded
suites (stack_repeats: one graph, and one graph run twice; compile_modes: a CUDA-graph replay,
dynamic shapes valued from a hand-made record of the run's sizes), each cause on a hand-made graph,
the sum exact; the console line and the HTML bar that show it."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import ledgers as L
import pytest
from helpers import ledger_fragment
from typer.testing import CliRunner

from fuseci.cli import app
from fuseci.ledger import excess, store
from fuseci.ledger.boundary import boundaries, floor
from fuseci.ledger.graph import parse_graph, tensor_type
from fuseci.records.fusion import Cause, Kind, Ledger, Measured, Node, Provenance, Row
from fuseci.reporters import ledger as report
from fuseci.reporters import ledger_html
from fuseci.store import results
from fuseci.validation import Invalid, validate

DATA = Path(__file__).resolve().parent / "data"
REPORTS = DATA / "reports"
MB = 1 << 20


def _ledgers(suite: str, tmp: Path, report_path: Path | None = None) -> dict[str, Ledger]:
    out = tmp / f"{suite}.json"
    rep = report_path or REPORTS / f"{suite}.ncu-rep.xz"
    args = ["run", str(DATA / "suites" / f"{suite}.yaml"), "--from-report", str(rep), "--baselines", str(tmp / "b")]
    result = CliRunner().invoke(app, [*args, "--json", str(out)])
    assert result.exit_code == 0, result.output
    return {
        f"{case.case}/{v.variant}": v.ledger
        for c in results.read_results(out)
        for case in c.cases
        for v in case.variants
        if v.ledger is not None
    }


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Ledger]:
    return _ledgers("stack_repeats", tmp_path_factory.mktemp("stack"))


@pytest.fixture(scope="module")
def modes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Ledger]:
    return _ledgers("compile_modes", tmp_path_factory.mktemp("modes"))


def _exact(ledger: Ledger) -> dict[Cause, float]:
    """The forward's causes, checked to sum to its requested bytes less its floor, to the byte."""
    parts = ledger.over_floor()
    assert parts is not None and ledger.requested_bytes is not None and ledger.floor_bytes is not None
    assert math.fsum(parts.values()) == ledger.requested_bytes - ledger.floor_bytes
    return parts


def test_requested_bytes_never_fall_below_the_minimum_where_dram_did(stack: dict[str, Ledger]) -> None:
    """The L2 kept the tensors of this small forward: DRAM reads 0.5-0.97x the minimum, the bytes
    the SMs asked for (LSU and TMA, the GEMMs' and attention's through the TMA) read 1x or more."""
    ledger = stack["stack/graph"]
    ratios = [r.ratio for r in ledger.rows]
    drams = [r.dram_ratio for r in ledger.rows]
    assert all(x is not None and x >= 1.0 for x in ratios), ratios
    assert all(x is not None and x < 1.0 for x in drams), drams
    # an elementwise kernel that moves each tensor once reads exactly 1x
    gelu = next(r for r in ledger.rows if r.kernel == "triton_poi_fused_gelu_view_2")
    assert gelu.requested == gelu.min_bytes == 2 * MB and not gelu.excess
    # the GEMMs load their tiles again: re-reads, up to 6.6x their minimum
    gemm = max(ledger.rows, key=lambda r: r.ratio or 0.0)
    assert gemm.kind is Kind.EXTERN and gemm.ratio == pytest.approx(6.578, abs=1e-3)
    assert gemm.excess[0].cause is Cause.REREAD


def test_a_graph_run_twice_has_twice_its_floor(stack: dict[str, Ledger]) -> None:
    """Compiled block by block, one graph runs twice: its floor and each row's minimum count both
    runs, so the rows read as they do compiled whole (the old DRAM total read 2.38x one floor)."""
    whole, blocks = stack["stack/graph"], stack["stack/blocks"]
    assert blocks.floor_bytes == 2 * 25_716_736
    assert all("graph 1/0 ran 2 times in the forward" in r.note for r in blocks.rows)
    assert [round(r.ratio or 0, 2) for r in blocks.rows if r.kernel == "triton_poi_fused_gelu_view_2"] == [1.0]
    per_kernel = {r.kernel: round(r.ratio or 0, 4) for r in blocks.rows}
    first_block = {r.kernel: round(r.ratio or 0, 4) for r in whole.rows[:9]}
    assert per_kernel["extern_kernels.addmm"] == first_block["extern_kernels.addmm"]
    assert blocks.requested_bytes is not None
    assert blocks.requested_bytes / blocks.floor_bytes == pytest.approx(5.725, abs=1e-3)


def test_the_causes_sum_to_the_forward_over_its_floor(stack: dict[str, Ledger], modes: dict[str, Ledger]) -> None:
    parts = _exact(stack["stack/graph"])
    assert parts[Cause.REREAD] == 224_325_632
    assert parts[Cause.BOUNDARY] == 19_398_656
    assert parts[Cause.UNEXPLAINED] == 344_064 and parts[Cause.LAYOUT] == parts[Cause.WIDENED] == 0
    # every intermediate is named with the rows on both sides of it
    crossing = [p.what for p in stack["stack/graph"].excess if p.cause is Cause.BOUNDARY]
    assert any(
        w.startswith("addmm_2 (bf16, 1.0 MB): written by extern_kernels.addmm (addmm_2); read by triton_poi_fused_gelu")
        for w in crossing
    ), crossing
    assert any(w.startswith("arg0_1 (bf16, 262,144 bytes): a graph input; read by") for w in crossing)
    _exact(stack["stack/blocks"])
    # a CUDA-graph replay, and a kernel no call claims (its bytes unexplained, whole)
    replayed = modes["graphs/compiled"]
    parts = _exact(replayed)
    untraced = [p for p in replayed.excess if p.what.startswith("(untraced)")]
    assert [p.bytes for p in untraced] == [replayed.rows[-1].requested] and parts[Cause.UNEXPLAINED] >= untraced[
        0
    ].bytes


def test_symbolic_sizes_have_no_minimum_until_the_run_s_sizes_are_recorded(
    modes: dict[str, Ledger], tmp_path: Path
) -> None:
    dynamic = modes["dynamic/compiled"]
    assert dynamic.floor_bytes is None and all(r.min_bytes is None for r in dynamic.rows)
    assert dynamic.over_floor() is None
    # the record of a harness that kept each symbol's value in the run (hand-made: s77 is the
    # batch, s27 the sequence of the case's 2 x 256 x 1024 input)
    record = json.loads((REPORTS / "compile_modes.harness.json").read_text())
    record["cases"]["dynamic"]["provenance"]["compiled"]["sizes"] = {"0/0": {"s77": 2, "s27": 256}}
    rep = tmp_path / "compile_modes.ncu-rep.xz"
    shutil.copy(REPORTS / "compile_modes.ncu-rep.xz", rep)
    rep.with_name("compile_modes.harness.json").write_text(json.dumps(record))
    sized = _ledgers("compile_modes", tmp_path, rep)["dynamic/compiled"]
    static = modes["graphs/compiled"]  # the same block on the same shapes, compiled static
    assert [r.min_bytes for r in sized.rows] == [r.min_bytes for r in static.rows if r.kind is not Kind.UNTRACED]
    assert sized.floor_bytes == static.floor_bytes
    assert not any("no minimum" in r.note for r in sized.rows)
    _exact(sized)


def test_a_symbolic_size_is_valued_from_the_run_s_sizes() -> None:
    text = "bf16[s77, s27, 1024][1024*s27, 1024, 1]cuda:0"
    assert tensor_type(text) is not None and tensor_type(text).shape is None  # type: ignore[union-attr]
    typed = tensor_type(text, {"s77": 2, "s27": 256})
    assert typed is not None and typed.shape == (2, 256, 1024) and typed.strides == (262144, 1024, 1)
    assert typed.nbytes == 2 * 256 * 1024 * 2
    assert tensor_type("f32[2*s0 + 1, s0//2]", {"s0": 8}).shape == (17, 4)  # type: ignore[union-attr]
    for odd in ("bf16[Max(1, s0)]", "bf16[s9]", "bf16[s0//0]", "bf16[__import__('os')]"):
        assert tensor_type(odd, {"s0": 3}).shape is None, odd  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("sizes", "said"),
    [
        ([1], "sizes: expected an object"),
        ({"graph": {}}, "sizes.graph: not a valid key: expected a graph's id"),
        ({"0/0": [2]}, 'sizes["0/0"]: expected an object'),
        ({"0/0": {"s 0": 2}}, "expected a symbol's name (s27)"),
        ({"0/0": {"s0": -1}}, 'sizes["0/0"].s0: -1 is below the smallest value allowed'),
        ({"0/0": {"s0": True}}, 'sizes["0/0"].s0: expected an integer'),
    ],
)
def test_a_record_s_sizes_are_hostile_until_checked(sizes: object, said: str) -> None:
    with pytest.raises(Invalid) as err:
        validate(Provenance, {"artifacts": [], "sizes": sizes})
    assert err.value.where.startswith("sizes") and said in str(err.value)


# Each cause on a hand-made graph: x (bf16) widened to f32 by row A, scaled by B and narrowed back,
# copied into another layout by C (a clone), added to x by D.
GRAPH = """class <lambda>(torch.nn.Module):
    def forward(self, arg0_1: "bf16[1024, 1024][1024, 1]cuda:0"):
        convert_element_type: "f32[1024, 1024][1024, 1]cuda:0" = torch.ops.prims.convert_element_type.default(arg0_1, torch.float32)
        mul: "f32[1024, 1024][1024, 1]cuda:0" = torch.ops.aten.mul.Tensor(convert_element_type, 2)
        convert_element_type_1: "bf16[1024, 1024][1024, 1]cuda:0" = torch.ops.prims.convert_element_type.default(mul, torch.bfloat16)
        clone: "bf16[1024, 1024][1024, 1]cuda:0" = torch.ops.aten.clone.default(convert_element_type_1, memory_format = torch.contiguous_format)
        add: "bf16[1024, 1024][1024, 1]cuda:0" = torch.ops.aten.add.Tensor(clone, arg0_1)
        return (add,)
"""
CALLS = [["convert_element_type"], ["mul", "convert_element_type_1"], ["clone"], ["add"]]
#: (loads, stores) each row asked for, in MiB: A loads x 1.5 times (a re-read of 1 MiB); B stores
#: half a MiB above its output; C moves each tensor once; D loads 1 MiB less than its inputs.
ASKED = [(3, 4), (4, 2.5), (2, 2), (3, 2)]


def _hand_made() -> tuple[list[Row], excess.GraphRows]:
    graph = parse_graph(GRAPH, "hand-made graph")
    bounds = boundaries(graph, CALLS)
    rows = []
    for i, (b, (loads, stores)) in enumerate(zip(bounds, ASKED, strict=True)):
        assert b is not None and b.min_bytes is not None
        m = Measured(1, 0.0, 0.0, 0.0, 1.0, (f"k{i}",), loads=loads * MB, stores=stores * MB)
        rows.append(Row("0/0", f"k{i}", Kind.TRITON, tuple(Node(n, "", "", "") for n in b.nodes), m, b.min_bytes))
    layout = [excess.is_layout(graph, b) for b in bounds if b is not None]
    assert layout == [False, False, True, False]
    for i, (row, b) in enumerate(zip(rows, bounds, strict=True)):
        assert b is not None
        rows[i] = Row(
            **{
                **{f: getattr(row, f) for f in Row.__dataclass_fields__},
                "excess": excess.row_parts(row, excess.read_bytes(graph, b, 1), layout[i]),
            }
        )
    return rows, excess.GraphRows(graph, rows, bounds, [False] * 4, layout, 1)


def test_each_cause_on_a_hand_made_graph_and_their_sum_is_exact() -> None:
    rows, g = _hand_made()
    assert [[(p.cause, p.bytes / MB) for p in r.excess] for r in rows] == [
        [(Cause.REREAD, 1.0)],  # loads 3 MiB of a 2 MiB input
        [(Cause.UNEXPLAINED, 0.5)],  # stores half a MiB above its 2 MiB output
        [],  # a copy that moves each tensor once
        [(Cause.UNEXPLAINED, -1.0)],  # loads below its inputs read once
    ]
    parts = excess.graph_parts(g)
    assert parts is not None
    by = {(p.cause, p.what.split(" ")[0]): p.bytes / MB for p in parts}
    assert by == {
        (Cause.BOUNDARY, "arg0_1"): 2.0,  # x read by A and by D: once more than the floor's
        (Cause.BOUNDARY, "convert_element_type"): 4.0,  # the f32 intermediate written and read, as bf16
        (Cause.WIDENED, "convert_element_type"): 4.0,  # ... and the other half, for being f32
        (Cause.LAYOUT, "convert_element_type_1"): 4.0,  # written by B for the copy to read
        (Cause.LAYOUT, "clone"): 4.0,  # the copy, written and read by D
    }
    assert next(p.what for p in parts if p.cause is Cause.WIDENED).endswith(": widened from bf16")
    ledger = Ledger(tuple(rows), floor(g.graph), ("0/0",), excess=tuple(parts))
    assert ledger.floor_bytes == 4 * MB  # x read once, the sum written once
    total = ledger.over_floor()
    assert total is not None and ledger.requested_bytes == 22.5 * MB
    assert {c: x / MB for c, x in total.items()} == {
        Cause.REREAD: 1.0,
        Cause.BOUNDARY: 6.0,
        Cause.LAYOUT: 8.0,
        Cause.WIDENED: 4.0,
        Cause.UNEXPLAINED: -0.5,
    }
    assert math.fsum(total.values()) == ledger.requested_bytes - ledger.floor_bytes
    # a split that is not of these figures is not shown as if it were
    assert Ledger(tuple(rows), floor(g.graph), ("0/0",), excess=tuple(parts[1:])).over_floor() is None


def test_a_copy_for_a_library_call_is_a_layout_copy_whole() -> None:
    m = Measured(1, 0.0, 0.0, 0.0, 1.0, ("k",), loads=3 * MB, stores=2 * MB)
    row = Row("0/0", "triton_poi_fused_convolution_0", Kind.TRITON, (), m, 4 * MB)
    assert [(p.cause, p.bytes) for p in excess.row_parts(row, None, layout=True)] == [(Cause.LAYOUT, MB)]


def test_the_console_line_and_the_html_bar(stack: dict[str, Ledger]) -> None:
    ledger = stack["stack/graph"]
    lines = report.ledger_lines(ledger)
    assert lines[-3] == ("forward: 295.0 MB requested (61.9 MB of DRAM) over 17 rows; floor 50.9 MB (5.8x, DRAM 1.2x)")
    assert lines[-2] == (
        "over the floor: 244.1 MB = re-reads 224.3 MB + fusion boundaries 19.4 MB + unexplained 344,064 bytes"
    )
    assert report.summary_line(ledger) == (
        "17 kernels, 295.0 MB requested against a 50.9 MB floor; worst extern_kernels.addmm at 6.58x its minimum"
    )
    assert report.totals_brief(ledger) == (
        "295.0 MB requested, 61.9 MB of DRAM, floor 50.9 MB (5.8x), 17 kernel calls, 1 graph"
    )
    view = ledger_html.view(ledger)
    assert view.bar is not None
    assert [(s.cause, s.bytes) for s in view.bar.segments] == [
        ("floor", "50.9 MB"),
        ("re-reads", "224.3 MB"),
        ("fusion boundaries", "19.4 MB"),
        ("unexplained", "344,064 bytes"),
    ]
    assert sum(s.pct for s in view.bar.segments) == pytest.approx(100.0, abs=0.05)
    assert view.bar.caption == (
        "requested 295.0 MB against a floor of 50.9 MB (5.79x; DRAM 61.9 MB); above the floor, 244.1 MB: "
        "re-reads 224.3 MB, fusion boundaries 19.4 MB, unexplained 344,064 bytes"
    )
    html = ledger_fragment(ledger)
    assert html.count('class="seg seg-') == 4 and 'data-cause="fusion boundaries"' in html
    assert "<th>requested</th><th>DRAM ratio</th><th>above its minimum</th>" in html


def test_a_new_ledger_keeps_its_split_and_an_old_one_is_written_as_it_was(stack: dict[str, Ledger]) -> None:
    ledger = stack["stack/graph"]
    text = L.dumps(ledger)
    again = L.loads(text, "x.json")
    assert again == ledger and L.dumps(again) == text and again.over_floor() == ledger.over_floor()
    old = Path(__file__).resolve().parents[1] / "baselines" / "nvidia-h200" / "models.ledgers.json"
    kept = store.load_suite(old)
    written = json.loads(store.dumps_suite(kept))
    assert written["ledgers"] == json.loads(old.read_text())["ledgers"]  # no member it did not hold
    assert all(x.requested_bytes is None and x.over_floor() is None for x in kept.values())
