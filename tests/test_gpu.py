"""Tests that need an NVIDIA GPU, CuPy and ncu (marker ``gpu``); skipped elsewhere."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from fuseci.cli import app

pytestmark = pytest.mark.gpu

# Sizes that are not multiples of 4 (the vector width) nor of the block size, and one that is.
SIZES = [1, 3, 5, 257, 1000003, 1 << 20]


def _rand(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _close(out, ref: np.ndarray, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    import cupy as cp

    got = cp.asnumpy(out).astype(np.float64)
    assert got.shape == ref.shape
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol)


@pytest.mark.parametrize("n", SIZES)
def test_scale_relu_add_variants_match_float64(n: int) -> None:
    import cupy as cp

    from kernels import elementwise as k
    from kernels import mutants

    x, y = _rand((n,), n), _rand((n,), n + 1)
    ref = k.scale_relu_add_reference(x.astype(np.float64), y.astype(np.float64), 0.75)
    for fn in (k.scale_relu_add_unfused, k.scale_relu_add_fused, mutants.scale_relu_add_defused):
        _close(fn(cp.asarray(x), cp.asarray(y), 0.75), ref)


def test_fused_handles_unaligned_views() -> None:
    import cupy as cp

    from kernels import elementwise as k

    x, y = _rand((1001,), 7), _rand((1001,), 8)
    xs, ys = cp.asarray(x)[1:], cp.asarray(y)[1:]  # 4 bytes past a 16-byte boundary
    ref = k.scale_relu_add_reference(x[1:].astype(np.float64), y[1:].astype(np.float64), 2.0)
    _close(k.scale_relu_add_fused(xs, ys, 2.0), ref)


@pytest.mark.parametrize("shape", [(3, 5), (7, 1000), (129, 4096)])
def test_bias_gelu_matches_float64(shape: tuple[int, int]) -> None:
    import cupy as cp

    from kernels import elementwise as k

    x, b = _rand(shape, 1), _rand((shape[1],), 2)
    ref = k.bias_gelu_reference(x.astype(np.float64), b.astype(np.float64))
    for fn in (k.bias_gelu_unfused, k.bias_gelu_fused):
        _close(fn(cp.asarray(x), cp.asarray(b)), ref)


@pytest.mark.parametrize("shape", [(1, 3, 5, 7), (2, 64, 33, 31), (4, 256, 16, 16)])
def test_relu_bn_add_relu_matches_float64(shape: tuple[int, ...]) -> None:
    import cupy as cp

    from kernels import elementwise as k

    c = shape[1]
    x, r = _rand(shape, 3), _rand(shape, 4)
    mean, gamma, beta = _rand((c,), 5), _rand((c,), 6), _rand((c,), 7)
    var = np.random.default_rng(8).uniform(0.5, 2.0, c).astype(np.float32)
    args64 = [a.astype(np.float64) for a in (x, r, mean, var, gamma, beta)]
    ref = k.relu_bn_add_relu_reference(*args64, 1e-5)
    for fn in (k.relu_bn_add_relu_unfused, k.relu_bn_add_relu_fused):
        out = fn(*(cp.asarray(a) for a in (x, r, mean, var, gamma, beta)), 1e-5)
        _close(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("distribution", "dtype", "shape", "seed"),
    [
        ("normal", "float32", (1000003,), 7),
        ("normal", "float64", (257, 33), 2**40 + 5),
        ("normal", "float16", (4099,), 2**64 - 1),
        ("uniform", "float32", (1 << 20,), 0),
        ("uniform", "float64", (3, 5, 7), 123456789),
        ("uniform", "float16", (1000,), 99),
        ("randint", "int8", (100003,), 1),
        ("randint", "uint8", (5000,), 2),
        ("randint", "int32", (70000,), 3),
        ("randint", "int64", (70000,), 2**63 - 1),
        ("randint", "float32", (9999,), 4),
        ("normal", "bfloat16", (1000003,), 5),
        ("uniform", "float8_e4m3fn", (100000,), 6),
        ("normal", "float8_e5m2", (100000,), 7),
        ("randint", "bfloat16", (5000,), 8),
    ],
)
def test_inputs_on_the_gpu_are_the_host_reference_values(distribution: str, dtype: str, shape, seed: int) -> None:
    """The input kernel gives the values of its NumPy reference (fuseci.harness.inputs)."""
    import cupy as cp
    from philox import host_values

    from fuseci.config.dtypes import dtype as dtype_named
    from fuseci.config.model import INT_RANGES, InputSpec
    from fuseci.harness.arrays import minifloat
    from fuseci.harness.inputs import make_input

    bounds = {"low": -1.5, "high": 2.5}
    if distribution == "randint":
        first, last = INT_RANGES.get(dtype, (-1000, 1000))
        bounds = {"low": max(first, -(2**62)), "high": min(last, 2**62) + 1}
    spec = InputSpec("x", shape, dtype, distribution, seed, mean=0.5, std=2.0, **bounds)
    got = make_input(spec)
    kind = dtype_named(dtype)
    assert got.shape == shape and got.dtype == kind and got.data.dtype == np.dtype(kind.storage)
    assert got.data.flags.c_contiguous
    host = host_values(spec)
    flat = cp.asnumpy(got.data).reshape(-1)
    if kind.minifloat is not None:  # raw bits: the same rounding of the same float32, nearly always
        assert np.mean(flat == host) > 0.99 if distribution != "randint" else np.array_equal(flat, host)
        fmt = kind.minifloat
        want = minifloat.decode_host(host, fmt)
        step = np.maximum(
            fmt.epsilon * np.abs(want), 2.0 ** (1 - fmt.bias - fmt.mantissa_bits)
        )  # one step apart at most
        assert np.all(np.abs(minifloat.decode_host(flat, fmt) - want) <= step)
    elif distribution == "randint":
        assert np.array_equal(flat, host)
    else:  # the same float64 value, to the last bits of the device's log/cos against NumPy's
        tol = {"float64": 1e-12, "float32": 2e-7, "float16": 1e-3}[dtype]
        np.testing.assert_allclose(flat.astype(np.float64), host.astype(np.float64), rtol=tol, atol=tol)
        if dtype != "float64":  # rounded to fewer bits, nearly every element is identical
            assert np.mean(flat == host) > 0.99


def test_poisoned_allocations_expose_unwritten_output() -> None:
    import cupy as cp

    from fuseci.harness import arrays

    with arrays.get("cupy").poisoned(0):
        a = cp.empty(1000, dtype=cp.float32)
        cp.cuda.get_current_stream().synchronize()
    assert bool(cp.isnan(a).all())


def test_fuseci_run_end_to_end(tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real harness under real ncu: tiny suite, no baseline, then a baseline, then compare."""
    monkeypatch.chdir(root)
    suite = root / "tests" / "data" / "suites" / "tiny.yaml"
    args = ["--baselines", str(tmp_path / "baselines"), "--report-dir", str(tmp_path / "out")]
    runner = CliRunner()
    first = runner.invoke(app, ["run", str(suite), *args, "--json", str(tmp_path / "r.json")])
    assert first.exit_code == 0, first.output
    assert "no baseline" in first.output
    assert (tmp_path / "out" / "tiny.ncu-rep").exists()
    update = runner.invoke(app, ["update-baselines", str(suite), *args])
    assert update.exit_code == 0, update.output
    assert "written" in update.output
    again = runner.invoke(app, ["run", str(suite), *args, "--junit", str(tmp_path / "j.xml")])
    assert again.exit_code == 0, again.output

    doc = json.loads((tmp_path / "r.json").read_text())
    case = doc["suites"][0]["cases"][0]
    launches = {v["variant"]: v["values"]["launches"] for v in case["variants"]}
    assert launches == {"unfused": 3, "fused": 1, "defused": 2}
    gains = {v["variant"]: v["gains"] for v in case["variants"] if v["gains"]}
    assert math.isclose(gains["fused"]["launches"], 3.0)
    assert math.isclose(gains["defused"]["launches"], 1.5)


def test_wrong_results_fail_their_case_and_say_by_how_much(
    tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(root)
    suite = root / "tests" / "data" / "suites" / "tiny-wrong.yaml"
    junit = tmp_path / "j.xml"
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(suite),
            "--baselines",
            str(tmp_path / "b"),
            "--report-dir",
            str(tmp_path / "out"),
            "--junit",
            str(junit),
        ],
    )
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    # One block per wrong variant, headed by its verdict, each failed comparison under it.
    head = next(i for i, line in enumerate(lines) if line.startswith("  WRONG      forgets_relu/fused  "))
    assert lines[head + 1].startswith("    - wrong result: fused output 0 vs reference:"), lines[head : head + 3]
    # The unwritten tail holds the allocator's NaN poison: 3 elements, an infinite error.
    assert "    - wrong result: fused output 0 vs unfused: 3 of 1000003 elements" in result.output
    assert "max abs err inf" in result.output
    assert "fine" in result.output
    record = json.loads((tmp_path / "out" / "tiny-wrong.harness.json").read_text())
    assert record["cases"]["forgets_relu"]["measured"] == []
    assert record["cases"]["fine"]["measured"] == ["unfused", "fused"]
