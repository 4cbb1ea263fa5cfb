import math

import pandas as pd
import pytest

from fuseci import schema
from fuseci.metrics import VARIANT_COLUMNS, aggregate, gains, inventory, ratio
from fuseci.report import KERNEL_COLUMNS

TENSOR = 2**28  # bytes in one 64 Mi-element float32 tensor


def _kernel(case: str, variant: str, index: int, read: float, write: float, ns: float, occ: float) -> dict:
    row = {c: 0.0 for c in KERNEL_COLUMNS}
    row.update({
        schema.SUITE: "s", schema.CASE: case, schema.VARIANT: variant, schema.KERNEL_INDEX: index,
        schema.KERNEL: f"k{index}", schema.DEVICE_NAME: "GPU", schema.DRAM_READ: read, schema.DRAM_WRITE: write,
        schema.DURATION: ns, schema.OCC_ACHIEVED: occ, schema.OCC_THEORETICAL: 100.0, schema.L2_WRITE_SECTORS: write / 32,
        schema.GRID_SIZE: 10 + index, schema.BLOCK_SIZE: 256, schema.REGISTERS: 16, schema.REPLAY_PASSES: 1,
    })  # fmt: skip
    return row


@pytest.fixture
def synthetic() -> pd.DataFrame:
    rows = [
        _kernel("c", "unfused", 0, 100.0, 100.0, 1000.0, 50.0),
        _kernel("c", "unfused", 1, 200.0, 100.0, 3000.0, 30.0),
        _kernel("c", "fused", 0, 100.0, 50.0, 1000.0, 90.0),
    ]
    return pd.DataFrame.from_records(rows, columns=list(KERNEL_COLUMNS))


def test_aggregate_sums_and_weights(synthetic: pd.DataFrame) -> None:
    v = aggregate(synthetic)
    assert tuple(v.columns) == VARIANT_COLUMNS
    u = v[v.variant == "unfused"].iloc[0]
    assert u[schema.LAUNCHES] == 2
    assert u[schema.DRAM_READ] == 300 and u[schema.DRAM_WRITE] == 200 and u[schema.DRAM_BYTES] == 500
    assert u[schema.DURATION] == 4000
    assert u[schema.DRAM_READ_RATE] == pytest.approx(300 / 4e-6)
    assert u[schema.OCC_ACHIEVED] == pytest.approx((50 * 1000 + 30 * 3000) / 4000)  # duration-weighted
    assert u[schema.L2_WRITE_BYTES] == 200


def test_gains_are_unfused_over_variant(synthetic: pd.DataFrame) -> None:
    g = gains(aggregate(synthetic))
    assert list(g.variant) == ["fused"]
    row = g.iloc[0]
    assert row[schema.LAUNCHES] == 2.0
    assert row[schema.DRAM_BYTES] == pytest.approx(500 / 150)
    assert row[schema.DURATION] == 4.0


def test_ratio_undefined() -> None:
    assert math.isnan(ratio(1.0, 0.0))
    assert math.isnan(ratio(math.nan, 1.0))
    assert ratio(3.0, 1.5) == 2.0


def test_inventory_in_launch_order(synthetic: pd.DataFrame) -> None:
    inv = inventory(synthetic, "c", "unfused")
    assert [(k.name, k.grid, k.block) for k in inv] == [("k0", 10, 256), ("k1", 11, 256)]


def test_recorded_gains_match_the_analytic_minimum(clean_kernels) -> None:
    """On the real report, bytes moved are what the chain must move (within L2's leftovers)."""
    v = aggregate(clean_kernels).set_index([schema.CASE, schema.VARIANT])
    # fused scale_relu_add: read x and y, write out: 3 tensors; unfused: 7 tensor passes.
    assert v.loc[("scale_relu_add", "fused"), schema.DRAM_BYTES] == pytest.approx(3 * TENSOR, rel=0.05)
    assert v.loc[("scale_relu_add", "unfused"), schema.DRAM_BYTES] == pytest.approx(7 * TENSOR, rel=0.05)
    g = gains(aggregate(clean_kernels)).set_index(schema.CASE)
    assert g.loc["scale_relu_add", schema.DRAM_BYTES] == pytest.approx(7 / 3, rel=0.03)
    assert g.loc["scale_relu_add", schema.LAUNCHES] == 3
    assert g.loc["bias_gelu", schema.LAUNCHES] == 10
    assert (g[schema.DURATION] > 2).all()
