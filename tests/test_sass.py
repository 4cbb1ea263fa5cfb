"""SASS text read into per-kernel summaries and diffed (fuseci.records.sass), from SASS recorded
with nvcc and cuobjdump from the project's kernels (tests/data/sass/README.md), and from hostile text."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest
from helpers import changed_lines

from fuseci import validation as v
from fuseci.records import sass
from fuseci.records.sass import KernelCode

SASS = Path(__file__).parent / "data" / "sass"


def text(name: str) -> str:
    return lzma.decompress((SASS / name).read_bytes()).decode()


def code(name: str) -> KernelCode:
    (summary,) = sass.summarize(text(f"{name}.sass.xz")).values()
    return summary


def test_the_fused_chain_loads_and_stores_16_bytes_at_a_time() -> None:
    summaries = sass.summarize(text("scale_relu_add.sass.xz"))
    assert list(summaries) == ["fuseci_scale_relu_add"]
    c = summaries["fuseci_scale_relu_add"]
    assert (c.registers, c.local_bytes, c.instructions) == (32, 0, 264)
    # float4 body, scalar tail: hints (.CONSTANT) are not part of a form, constant loads not counted
    assert c.ops == {"LDG.E": 10, "LDG.E.128": 10, "STG.E": 5, "STG.E.128": 5}
    assert c.spills == (0, 0)


def test_nvdisasm_reads_as_cuobjdump_less_the_resources() -> None:
    (c,) = sass.summarize(text("scale_relu_add.nvdisasm.xz")).values()
    assert c.ops == code("scale_relu_add").ops and c.instructions == 264
    assert (c.registers, c.local_bytes) == (None, None)  # nvdisasm does not print -res-usage


def test_a_scalar_build_names_its_narrower_loads() -> None:
    changes = sass.code_changes(code("scale_relu_add"), code("scale_relu_add_scalar"))
    assert changes == ["LDG.E.128 ×10 → none", "STG.E.128 ×5 → none", "instructions 264 → 120"]
    lines = changed_lines(
        text("scale_relu_add.sass.xz"), text("scale_relu_add_scalar.sass.xz"), "fuseci_scale_relu_add"
    )
    assert lines == ["- LDG.E.128.CONSTANT R4, desc[UR4][R16.64]  (×10)", "- STG.E.128 desc[UR4][R18.64], R8  (×5)"]


def test_a_kernel_that_rereads_an_input_has_more_loads() -> None:
    healthy, rereads = code("scale_relu_add"), code("rereads")
    assert sass.code_changes(healthy, rereads) == [
        "LDG.E ×10 + LDG.E.128 ×10 → LDG.E ×15 + LDG.E.128 ×15",
        "instructions 264 → 448",
    ]


def test_spills_are_local_stores_and_loads_with_the_stack() -> None:
    heavy, spills = code("register_heavy"), code("register_heavy_spills")
    assert spills.spills == (30, 48) and heavy.spills == (0, 0)
    assert sass.code_changes(heavy, spills) == [
        "no STL → STL ×10 + STL.64 ×20",
        "no LDL → LDL ×28 + LDL.64 ×20",
        "registers 64 → 32",
        "local memory 0 → 200 bytes per thread",
        "instructions 264 → 352",
    ]
    lines = changed_lines(
        text("register_heavy.sass.xz"), text("register_heavy_spills.sass.xz"), "fuseci_mutant_register_heavy"
    )
    # a reordering of the global loads is no change: only what moved in number is shown
    assert [line.split()[:2] for line in lines] == [["+", "STL"], ["+", "STL.64"], ["+", "LDL.64"], ["+", "LDL.LU"]]
    assert lines[0].endswith("(×10)")


def test_tensor_cores_and_asynchronous_copies_are_counted_by_shape() -> None:
    c = code("tile_mma")
    assert c.ops == {"HMMA.16816.F32": 2, "LDGSTS.E.128": 10, "LDS": 6, "LDSM.16.M88.4": 2, "STG.E.64": 4}


def test_tma_and_wgmma_lines() -> None:
    lines = """
        Function : k
        /*0000*/                   UTMALDG.2D [UR8], [UR14] ;      /* 0x0000000e080075b4 */
        /*0010*/              @!P0 UTMASTG.3D.IM2COL [UR4], [UR6] ;
        /*0020*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT, gsb0 ;
        /*0030*/                   LDG.E.64.STRONG.GPU R2, desc[UR4][R4.64] ;
        /*0040*/                   EXIT ;
        ..........
"""
    (c,) = sass.summarize(lines).values()
    assert c.ops == {"HGMMA.64x128x16.F32.BF16": 1, "LDG.E.64": 1, "UTMALDG.2D": 1, "UTMASTG.3D.IM2COL": 1}
    assert c.instructions == 5


def test_same_code_says_nothing() -> None:
    assert sass.code_changes(code("scale_relu_add"), code("scale_relu_add")) == []
    same = text("scale_relu_add.sass.xz")
    assert changed_lines(same, same, "fuseci_scale_relu_add") == []


def test_changes_are_few() -> None:
    old = KernelCode(ops={f"LD{c}": 1 for c in "ABCDEFGHIJ"})
    changes = sass.code_changes(old, KernelCode())
    assert len(changes) == sass.MAX_CHANGES and changes[-1] == "5 more changes"


@pytest.mark.parametrize(
    "hostile",
    [
        "",
        "\x00\x01garbage\xff" * 1000,
        "Function : \n/*0000*/ LDG.E R1 ;",
        "Function : k\n        /*0000*/   LDG.E R1, desc[UR4][R2.64]",  # cut before its ';'
        "Resource usage:\n Function k:\n  REG:x STACK:0",
        "Function : " + "k" * (sass.MAX_NAME + 1) + "\n/*0000*/ LDG.E R1 ;\n",
        "\n".join(["/*0000*/ LDG.E R1 ;"] * 100),  # instructions outside any kernel
    ],
)
def test_hostile_text_is_no_kernel(hostile: str) -> None:
    assert sass.summarize(hostile) == {}
    assert changed_lines(hostile, hostile, "k") == []


def test_a_truncated_text_is_the_kernels_it_holds() -> None:
    full = text("rereads.sass.xz")
    cut = sass.summarize(full[: len(full) // 2])
    assert list(cut) == ["fuseci_mutant_rereads"]
    assert 0 < cut["fuseci_mutant_rereads"].instructions < code("rereads").instructions


def test_kernels_per_text_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sass, "MAX_KERNELS", 3)
    many = "".join(f"Function : k{i}\n        /*0000*/ EXIT ;\n" for i in range(10))
    assert list(sass.summarize(many)) == ["k0", "k1", "k2"]


def test_a_summary_reads_back_from_its_object() -> None:
    c = code("tile_mma")
    assert v.validate(KernelCode, c.to_json()) == c
    with pytest.raises(v.Invalid):
        v.validate(KernelCode, {"ops": {"ldg; rm -rf": 1}})
    with pytest.raises(v.Invalid):
        v.validate(KernelCode, {"registers": -1})


def test_the_build_a_run_launched_is_picked_by_its_registers() -> None:
    a, b = KernelCode(registers=32, instructions=1), KernelCode(registers=40, instructions=2)
    assert sass.pick([a], 99) is a
    assert sass.pick([a, b], 40) is b
    assert sass.pick([a, b], 64) is None
    assert sass.pick([a, KernelCode(registers=32, instructions=3)], 32) is None
