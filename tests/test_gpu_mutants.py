"""The planted performance regressions in kernels/mutants.py: each must compute exactly what the
healthy fused kernel computes (or fuseci would catch it as a wrong result, not as the regression
it plants), and register_heavy must halve theoretical occupancy through registers alone. The
metrics themselves (bytes, launches, occupancy under ncu) are the suites' business. gpu-marked."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

ALPHA = 0.75
RTOL, ATOL = 1e-5, 1e-6
MUTANTS = ("rereads", "extra_launch", "register_heavy", "strided")
# Not multiples of 4 (the vector width), 8 (the strided row), 32 or 256; below one block and above.
SIZES = (1, 3, 7, 8, 1000, 4097, (1 << 20) + 3)


def _mutant(name: str):
    from kernels import mutants

    return getattr(mutants, f"scale_relu_add_{name}")


def _inputs(shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng()  # fresh data on every run: the mutants must be right on any input
    return rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape).astype(np.float32)


def _reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    from kernels.elementwise import scale_relu_add_reference

    return scale_relu_add_reference(x.astype(np.float64), y.astype(np.float64), ALPHA)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", MUTANTS)
def test_mutant_matches_float64_reference_and_fused(name: str, size: int) -> None:
    import cupy as cp

    from kernels.elementwise import scale_relu_add_fused, scale_relu_add_unfused

    x, y = _inputs((size,))
    xd, yd = cp.asarray(x), cp.asarray(y)
    got = _mutant(name)(xd, yd, ALPHA)
    assert isinstance(got, cp.ndarray) and got.dtype == cp.float32 and got.shape == x.shape
    np.testing.assert_allclose(cp.asnumpy(got).astype(np.float64), _reference(x, y), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(cp.asnumpy(got), cp.asnumpy(scale_relu_add_unfused(xd, yd, ALPHA)), rtol=RTOL, atol=ATOL)
    # The same float32 operations as the healthy kernel: equal to it bit for bit, and repeatable.
    assert cp.array_equal(got, scale_relu_add_fused(xd, yd, ALPHA))
    assert cp.array_equal(got, _mutant(name)(xd, yd, ALPHA))


@pytest.mark.parametrize("name", MUTANTS)
def test_mutant_keeps_shape_and_handles_unaligned_views(name: str) -> None:
    import cupy as cp

    x, y = _inputs((37, 129))
    got = _mutant(name)(cp.asarray(x), cp.asarray(y), ALPHA)
    assert got.shape == (37, 129)
    np.testing.assert_allclose(cp.asnumpy(got).astype(np.float64), _reference(x, y), rtol=RTOL, atol=ATOL)
    flat_x, flat_y = x.reshape(-1), y.reshape(-1)
    xs, ys = cp.asarray(flat_x)[1:], cp.asarray(flat_y)[1:]  # 4 bytes past a 16-byte boundary
    got = _mutant(name)(xs, ys, ALPHA)
    np.testing.assert_allclose(
        cp.asnumpy(got).astype(np.float64), _reference(flat_x[1:], flat_y[1:]), rtol=RTOL, atol=ATOL
    )


@pytest.mark.parametrize("size", [1000, 4097, (1 << 20) + 3])
def test_wrong_mutant_does_not_match(size: int) -> None:
    import cupy as cp

    from kernels.mutants import scale_relu_add_wrong

    x, y = _inputs((size,))
    got = cp.asnumpy(scale_relu_add_wrong(cp.asarray(x), cp.asarray(y), ALPHA)).astype(np.float64)
    assert not np.allclose(got, _reference(x, y), rtol=RTOL, atol=ATOL)


def _theoretical_warps(kernel, threads: int) -> int:
    """Resident warps per SM for ``kernel`` in blocks of ``threads``, as the occupancy calculator
    counts them for a kernel without shared memory: registers go to warps in units of 256."""
    import cupy as cp

    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    warps_per_block = -(-threads // 32)
    regs_per_warp = -(-kernel.num_regs * 32 // 256) * 256
    by_registers = props["regsPerMultiprocessor"] // regs_per_warp // warps_per_block
    by_threads = props["maxThreadsPerMultiProcessor"] // threads
    by_blocks = props["maxBlocksPerMultiProcessor"]
    blocks = min(by_registers, by_threads, by_blocks)
    # The driver's own answer for the same kernel and block size must agree.
    assert cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, threads, 0) == blocks
    return blocks * warps_per_block


@pytest.mark.parametrize("index_type", ["int", "long long"])
def test_register_heavy_halves_theoretical_occupancy_by_registers(index_type: str) -> None:
    from kernels._vector import THREADS, _compile
    from kernels.elementwise import _SCALE_RELU_ADD
    from kernels.mutants import _register_heavy_kernel

    healthy, heavy = _compile(_SCALE_RELU_ADD, index_type), _register_heavy_kernel(index_type)
    # Registers alone: neither kernel uses shared memory, and the heavy one does not spill.
    assert healthy.shared_size_bytes == 0 and heavy.shared_size_bytes == 0
    assert heavy.local_size_bytes == 0
    assert heavy.num_regs > healthy.num_regs
    assert _theoretical_warps(heavy, THREADS) * 2 == _theoretical_warps(healthy, THREADS)
