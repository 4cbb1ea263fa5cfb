import lzma
from pathlib import Path

import pytest
from helpers import CLEAN_REPORT

from fuseci.config import names
from fuseci.errors import ReportError
from fuseci.frames.report import kernel_columns, read_report

LAUNCHES = {
    ("scale_relu_add", "unfused"): 3,
    ("scale_relu_add", "fused"): 1,
    ("bias_gelu", "unfused"): 10,
    ("bias_gelu", "fused"): 1,
    ("relu_bn_add_relu", "unfused"): 9,
    ("relu_bn_add_relu", "fused"): 1,
    ("add_mul", "unfused"): 2,
    ("add_mul", "fused"): 1,
    ("relu_and_scale", "unfused"): 2,
    ("relu_and_scale", "fused"): 1,
}


def test_one_row_per_kernel_attributed_by_nvtx_range(clean_kernels) -> None:
    assert tuple(clean_kernels.columns) == kernel_columns()
    counts = clean_kernels.groupby([names.CASE, names.VARIANT]).size().to_dict()
    assert counts == LAUNCHES
    assert set(clean_kernels[names.SUITE]) == {"elementwise"}


def test_kernel_order_and_names(clean_kernels) -> None:
    unfused = clean_kernels[(clean_kernels.case == "scale_relu_add") & (clean_kernels.variant == "unfused")]
    assert list(unfused[names.KERNEL_INDEX]) == [0, 1, 2]
    assert [n.split("__")[0] for n in unfused[names.KERNEL]] == ["cupy_multiply", "cupy_maximum", "cupy_add"]
    fused = clean_kernels[(clean_kernels.case == "scale_relu_add") & (clean_kernels.variant == "fused")]
    assert list(fused[names.KERNEL]) == ["fuseci_scale_relu_add"]


def test_metrics_are_real_numbers(clean_kernels) -> None:
    for metric in (names.DRAM_READ, names.DURATION, names.OCC_ACHIEVED, names.GRID_SIZE, names.BLOCK_SIZE):
        assert (clean_kernels[metric] > 0).all(), metric
    # Writes of the 256-element per-channel kernels stay in L2; every large kernel's reach DRAM.
    large = clean_kernels[clean_kernels[names.GRID_SIZE] > 1000]
    assert (large[names.DRAM_WRITE] > 2**27).all()
    assert set(clean_kernels[names.DEVICE_NAME]) == {"NVIDIA H200"}
    # Recorded with the TMA byte counters, which take ncu three replay passes (docs/NCU.md); the
    # shipped CuPy suites now leave them out (one pass), and a report holding them reads the same.
    assert set(clean_kernels[names.REPLAY_PASSES]) == {3.0}
    # The fused kernel reads x and y (2 x 256 MiB) from DRAM.
    fused = clean_kernels[(clean_kernels.case == "scale_relu_add") & (clean_kernels.variant == "fused")].iloc[0]
    assert fused[names.DRAM_READ] == pytest.approx(2 * 2**28, rel=0.02)


def test_uncompressed_report_reads_the_same(tmp_path: Path, clean_kernels) -> None:
    plain = tmp_path / "elementwise.ncu-rep"
    plain.write_bytes(lzma.decompress(CLEAN_REPORT.read_bytes()))
    assert read_report(plain).equals(clean_kernels)


def test_missing_report(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="report not found"):
        read_report(tmp_path / "nope.ncu-rep")


def test_truncated_xz(tmp_path: Path) -> None:
    bad = tmp_path / "cut.ncu-rep.xz"
    bad.write_bytes(CLEAN_REPORT.read_bytes()[:5000])
    with pytest.raises(ReportError, match="cannot decompress"):
        read_report(bad)


@pytest.mark.parametrize("content", [b"", b"not a report at all\n" * 100])
def test_garbage_report(tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "bad.ncu-rep"
    bad.write_bytes(content)
    with pytest.raises(ReportError, match="holds no profiled kernel"):
        read_report(bad)


def test_truncated_report(tmp_path: Path) -> None:
    # The reader returns what it could parse; here the last kernel lost its NVTX state.
    raw = lzma.decompress(CLEAN_REPORT.read_bytes())
    bad = tmp_path / "cut.ncu-rep"
    bad.write_bytes(raw[: len(raw) - 1000])
    with pytest.raises(ReportError, match="truncated"):
        read_report(bad)
