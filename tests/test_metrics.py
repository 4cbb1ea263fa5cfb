import math

import pandas as pd
import pytest
from helpers import dram_peak

from fuseci.config import names
from fuseci.frames.metrics import aggregate, gains, inventory, ratio, variant_columns
from fuseci.frames.report import kernel_columns

TENSOR = 2**28  # bytes in one 64 Mi-element float32 tensor
LIMIT = next(iter(names.OCCUPANCY_LIMITERS))


def _kernel(case: str, variant: str, index: int, read: float, write: float, ns: float, occ: float) -> dict:
    row = {c: 0.0 for c in kernel_columns()}
    row.update({
        names.SUITE: "s", names.CASE: case, names.VARIANT: variant, names.KERNEL_INDEX: index,
        names.KERNEL: f"k{index}", names.DEVICE_NAME: "GPU", names.DRAM_READ: read, names.DRAM_WRITE: write,
        names.DURATION: ns, names.OCC_ACHIEVED: occ, names.OCC_THEORETICAL: 100.0, names.L2_WRITE_SECTORS: write / 32,
        names.GRID_SIZE: 10 + index, names.BLOCK_SIZE: 256, names.REGISTERS: 16, names.REPLAY_PASSES: 1,
    })  # fmt: skip
    return row


@pytest.fixture
def synthetic() -> pd.DataFrame:
    rows = [
        _kernel("c", "unfused", 0, 100.0, 100.0, 1000.0, 50.0),
        _kernel("c", "unfused", 1, 200.0, 100.0, 3000.0, 30.0),
        _kernel("c", "fused", 0, 100.0, 50.0, 1000.0, 90.0),
    ]
    return pd.DataFrame.from_records(rows, columns=list(kernel_columns()))


def test_aggregate_sums_and_weights(synthetic: pd.DataFrame) -> None:
    v = aggregate(synthetic)
    assert tuple(v.columns) == variant_columns()
    u = v[v.variant == "unfused"].iloc[0]
    assert u[names.LAUNCHES] == 2
    assert u[names.DRAM_READ] == 300 and u[names.DRAM_WRITE] == 200 and u[names.DRAM_BYTES] == 500
    assert u[names.DURATION] == 4000
    assert u[names.DRAM_READ_RATE] == pytest.approx(300 / 4e-6)
    assert u[names.OCC_ACHIEVED] == pytest.approx((50 * 1000 + 30 * 3000) / 4000)  # duration-weighted
    assert u[names.L2_WRITE_BYTES] == 200


def test_gains_are_unfused_over_variant(synthetic: pd.DataFrame) -> None:
    g = gains(aggregate(synthetic))
    assert list(g.variant) == ["fused"]
    row = g.iloc[0]
    assert row[names.LAUNCHES] == 2.0
    assert row[names.DRAM_BYTES] == pytest.approx(500 / 150)
    assert row[names.DURATION] == 4.0


def test_ratio_undefined() -> None:
    assert math.isnan(ratio(1.0, 0.0))
    assert math.isnan(ratio(math.nan, 1.0))
    assert ratio(3.0, 1.5) == 2.0


def test_inventory_in_launch_order(synthetic: pd.DataFrame) -> None:
    inv = inventory(synthetic, "c", "unfused")
    assert [(k.name, k.grid, k.block) for k in inv] == [("k0", 10, 256), ("k1", 11, 256)]


def test_recorded_gains_match_the_analytic_minimum(clean_kernels) -> None:
    """On the real report, bytes moved are what the chain must move (within L2's leftovers)."""
    v = aggregate(clean_kernels).set_index([names.CASE, names.VARIANT])
    # fused scale_relu_add: read x and y, write out: 3 tensors; unfused: 7 tensor passes.
    assert v.loc[("scale_relu_add", "fused"), names.DRAM_BYTES] == pytest.approx(3 * TENSOR, rel=0.05)
    assert v.loc[("scale_relu_add", "unfused"), names.DRAM_BYTES] == pytest.approx(7 * TENSOR, rel=0.05)
    g = gains(aggregate(clean_kernels)).set_index(names.CASE)
    assert g.loc["scale_relu_add", names.DRAM_BYTES] == pytest.approx(7 / 3, rel=0.03)
    assert g.loc["scale_relu_add", names.LAUNCHES] == 3
    assert g.loc["bias_gelu", names.LAUNCHES] == 10
    assert (g[names.DURATION] > 2).all()


def test_the_cards_peak_dram_bandwidth_is_what_ncus_percentage_implies(clean_kernels) -> None:
    # The H200's HBM3e: 4.8 TB/s; every busy kernel of the recorded run implies the same peak.
    assert dram_peak(clean_kernels) == pytest.approx(4.81e12, rel=0.002)
    idle = clean_kernels.assign(**{names.DRAM_PCT_PEAK: 0.5})
    assert dram_peak(idle) is None


def _series_sum(values: pd.Series) -> float:
    return float(values.sum())


def _reference(kernels: pd.DataFrame) -> pd.DataFrame:
    """The per-variant sums, weights and extremes by pandas, each group's Series summed as a
    Series sums (groupby's own sum compensates, and differs in the last bit): what aggregate()
    must give."""
    k = kernels.assign(
        _ach=kernels[names.OCC_ACHIEVED] * kernels[names.DURATION],
        _limit_order=kernels[names.DURATION].fillna(-1.0),
    )
    g = k.groupby([names.SUITE, names.CASE, names.VARIANT], sort=False)
    out = pd.DataFrame({
        names.LAUNCHES: g.size(),
        names.DRAM_READ: g[names.DRAM_READ].agg(_series_sum),
        names.DRAM_WRITE: g[names.DRAM_WRITE].agg(_series_sum),
        names.DURATION: g[names.DURATION].agg(_series_sum),
        names.REPLAY_PASSES: g[names.REPLAY_PASSES].max(),
        "ach_sum": g["_ach"].agg(_series_sum),
        "ach_mean": g[names.OCC_ACHIEVED].mean(),
        "ach_known": g[names.OCC_ACHIEVED].count(),
        "longest": g["_limit_order"].idxmax(),
    })  # fmt: skip
    return out


def test_aggregate_is_pandas_groupby_to_the_bit(clean_kernels) -> None:
    """Shuffled rows (groups in order of first appearance), NaN and zeros in every metric: the
    per-variant frame holds exactly what pandas' groupby computes."""
    import numpy as np

    for seed in range(12):
        rng = np.random.default_rng(seed)
        k = clean_kernels.sample(frac=1.0, random_state=seed).reset_index(drop=True)
        for c in kernel_columns()[6:]:
            k.loc[rng.random(len(k)) < 0.3, c] = math.nan
            k.loc[rng.random(len(k)) < 0.1, c] = 0.0
        got = aggregate(k)
        ref = _reference(k)
        assert list(zip(got[names.CASE], got[names.VARIANT], strict=True)) == [(c, v) for _, c, v in ref.index]
        for col in (names.LAUNCHES, names.DRAM_READ, names.DRAM_WRITE, names.DURATION, names.REPLAY_PASSES):
            assert got[col].tolist() == pytest.approx(ref[col].tolist(), rel=0, abs=0, nan_ok=True), col
        total = ref[names.DURATION]
        weighted = (ref["ach_sum"] / total).where((total > 0) & (ref["ach_known"] > 0), ref["ach_mean"])
        assert got[names.OCC_ACHIEVED].tolist() == pytest.approx(weighted.tolist(), rel=0, abs=0, nan_ok=True)
        limits = k.loc[ref["longest"], LIMIT].tolist()
        assert got[LIMIT].tolist() == pytest.approx(limits, rel=0, abs=0, nan_ok=True)
        g = gains(got)
        fused = got[got[names.VARIANT] != "unfused"].set_index(names.CASE)
        unfused = got[got[names.VARIANT] == "unfused"].set_index(names.CASE)
        for _, row in g.iterrows():
            expect = ratio(unfused.loc[row[names.CASE], names.DURATION], fused.loc[row[names.CASE], names.DURATION])
            assert row[names.DURATION] == pytest.approx(expect, rel=0, abs=0, nan_ok=True)
