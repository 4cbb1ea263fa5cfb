"""The PyTorch runtime (fuseci.harness.arrays.device_torch) against the CuPy runtime on one card:
the same inputs bit for bit, the same comparisons, and a torch-only suite run with CuPy hidden."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]

CASES = [
    (distribution, dtype, shape, seed)
    for seed, (distribution, dtype, shape) in enumerate(
        [
            ("normal", "float64", (1 << 20) + 3),
            ("uniform", "float64", 300_001),
            ("normal", "float32", (3, 1 << 20)),
            ("uniform", "float32", 65_537),
            ("normal", "float16", 1_000_003),
            ("uniform", "float16", 77_777),
            ("normal", "bfloat16", (1 << 22) + 5),
            ("uniform", "bfloat16", 300_000),
            ("normal", "float8_e4m3fn", 500_000),
            ("uniform", "float8_e5m2", 500_000),
            ("randint", "int32", 1_000_000),
            ("randint", "int64", 1_000_000),
            ("randint", "uint8", 100_000),
            ("randint", "int8", 100_000),
            ("randint", "float32", 100_000),
            ("randint", "bfloat16", 100_000),
            ("normal", "int32", 100_000),
        ]
    )
]


def _bits_cupy(spec):
    import cupy as cp

    from fuseci.harness.inputs import make_input

    return cp.asnumpy(make_input(spec).data).reshape(-1).view(np.uint8)


def _bits_torch(spec):
    from fuseci.config.dtypes import dtype
    from fuseci.harness.arrays import device_torch
    from fuseci.harness.inputs import randint_bounds

    if spec.distribution == "randint":
        lo, count = randint_bounds(spec)
        p = (lo, count - 1)
    else:
        p = (spec.low, spec.high) if spec.distribution == "uniform" else (spec.mean, spec.std)
    t = device_torch.random_input(spec.shape, dtype(spec.dtype), spec.distribution, spec.seed, *p)
    return t.contiguous().view(-1).cpu().numpy().view(np.uint8)


@pytest.mark.parametrize(("distribution", "dtype", "shape", "seed"), CASES)
def test_the_torch_runtime_writes_the_cupy_runtimes_inputs_bit_for_bit(distribution, dtype, shape, seed) -> None:
    from fuseci.config.model import INT_RANGES, InputSpec

    bounds = {"low": -1.5, "high": 2.5}
    if distribution == "randint":
        first, last = INT_RANGES.get(dtype, (-1000, 1000))
        bounds = {"low": max(first, -(2**62)), "high": min(last, 2**62) + 1}
    shape = shape if isinstance(shape, tuple) else (shape,)
    spec = InputSpec("x", shape, dtype, distribution, 1000 + seed * 7919, mean=0.5, std=2.0, **bounds)
    want, got = _bits_cupy(spec), _bits_torch(spec)
    assert got.size == want.size
    differ = np.flatnonzero(got != want)
    assert differ.size == 0, f"{differ.size} bytes differ, first at byte {differ[:5]}"


def test_a_seed_over_two_to_the_63_and_the_full_int64_range_match() -> None:
    from fuseci.config.model import InputSpec

    spec = InputSpec("x", (100_000,), "int64", "randint", 2**64 - 12345, low=-(2**63), high=2**63)
    assert np.array_equal(_bits_cupy(spec), _bits_torch(spec))


def test_comparisons_agree_between_runtimes() -> None:
    """compare() on torch tensors finds what it finds on CuPy arrays: mismatches, NaN, worst."""
    import cupy as cp
    import torch

    from fuseci.harness.arrays import tensor

    rng = np.random.default_rng(5)
    e = rng.standard_normal(100_000)
    o = e + rng.standard_normal(100_000) * 1e-6
    o[17] = np.nan
    o[4242] += 0.5
    got = {}
    for name, lift in (("cupy", cp.asarray), ("torch", lambda a: torch.as_tensor(a, device="cuda"))):
        os.environ["FUSECI_RUNTIME"] = name
        from fuseci.harness.arrays import device

        device.runtime.cache_clear()
        try:
            d = tensor.compare(tensor.from_array(lift(o)), tensor.from_array(lift(e)), 1e-5, 1e-5)
        finally:
            os.environ.pop("FUSECI_RUNTIME")
            device.runtime.cache_clear()
        got[name] = d
    assert got["cupy"] == got["torch"]
    assert got["torch"].nan_count == 1 and got["torch"].mismatches >= 2


def test_the_pytorch_suite_passes_its_baselines_with_cupy_hidden(tmp_path: Path) -> None:
    """``fuseci run suites/pytorch.yaml`` where ``import cupy`` fails: the PyTorch runtime makes,
    checks and times everything, and the verdicts against the baselines (recorded on the CuPy
    runtime) pass."""
    hide = tmp_path / "hide"
    (hide / "cupy").mkdir(parents=True)
    (hide / "cupy" / "__init__.py").write_text("raise ImportError('No module named cupy (hidden)')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hide), str(ROOT)])}
    env.pop("FUSECI_RUNTIME", None)
    out = subprocess.run(
        [sys.executable, "-m", "fuseci", "run", "suites/pytorch.yaml", "--json", str(tmp_path / "r.json")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    text = (tmp_path / "r.json").read_text()
    assert '"runtime": "torch"' in text
    assert "REGRESSED" not in out.stdout
