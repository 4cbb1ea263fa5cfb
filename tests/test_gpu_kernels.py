"""Every shipped kernel against its float64 reference, on fresh random data, at several shapes
including ragged ones (not multiples of the vector width, the warp or the block). gpu-marked."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import SUITES
from philox import encode_host

from fuseci.config.dtypes import dtype
from fuseci.config.model import Case
from fuseci.config.parse import load_suite
from fuseci.harness import arrays
from fuseci.harness.arrays import Tensor
from fuseci.harness.case_runner import resolve
from fuseci.harness.correctness import BoundCall, reference_outputs, tolerances

pytestmark = pytest.mark.gpu

# Per suite/case, alternative shapes for its inputs (inputs not named keep their suite shape).
SHAPES: dict[str, list[dict[str, tuple[int, ...]]]] = {
    "elementwise/scale_relu_add": [{"x": (n,), "y": (n,)} for n in (1, 3, 5, 257, 1000003)],
    "elementwise/bias_gelu": [
        {"x": (r, c), "bias": (c,)} for r, c in ((1, 4), (3, 5), (7, 1000), (129, 4096), (33, 1028))
    ],
    "elementwise/relu_bn_add_relu": [
        {"x": s, "residual": s, "mean": (s[1],), "var": (s[1],), "gamma": (s[1],), "beta": (s[1],)}
        for s in ((1, 3, 5, 7), (2, 64, 33, 31), (4, 256, 16, 16))
    ],
    "elementwise/add_mul": [{"b": (n,), "c": (n,), "e": (n,)} for n in (1, 6, 1000001)],
    "elementwise/relu_and_scale": [{"x1": (n,), "x2": (n,)} for n in (2, 7, 999999)],
    "reduction/l2_norm": [{"x": (n,)} for n in (1, 5, 1000, 1000003, 1 << 22)],
    "reduction/sum_sumsq": [{"x": (n,)} for n in (1, 3, 4097, 1000003)],
    "reduction/softmax": [{"x": s} for s in ((1, 1), (3, 5), (17, 31), (64, 1024), (5, 3000), (1000, 130))],
    "normalization/relu_layernorm": [
        {"x": (r, c), "gamma": (c,), "beta": (c,)}
        for r, c in ((1, 8), (3, 5), (17, 100), (64, 1024), (9, 4099), (3, 2048))
    ],
    "normalization/rmsnorm_f16": [
        {"x": (r, c), "weight": (c,)}
        for r, c in ((1, 8), (3, 5), (17, 100), (64, 1024), (9, 4100), (5, 2048), (7, 264))
    ],
    "normalization/add_layernorm": [
        {"x": (r, c), "residual": (r, c), "gamma": (c,), "beta": (c,)}
        for r, c in ((1, 4), (3, 7), (31, 1024), (5, 2050), (3, 2048), (4, 36))
    ],
    "stencil/conv_bias_relu": [
        {"x": (n, ci, h, w), "weight": (co, ci, 3, 3), "bias": (co,)}
        for n, ci, co, h, w in ((1, 1, 1, 1, 1), (2, 3, 5, 9, 7), (1, 8, 16, 33, 70), (2, 32, 32, 64, 64))
    ],
    "stencil/depthwise_affine_relu6": [
        {"x": (n, c, h, w), "weight": (c, 3, 3), "scale": (c,), "shift": (c,)}
        for n, c, h, w in ((1, 1, 1, 1), (2, 3, 9, 7), (3, 16, 33, 70), (2, 8, 37, 64), (1, 4, 130, 132), (1, 2, 5, 4))
    ],
    # torch.compile(dynamic=False) compiles once per shape: at most 6 of them, under dynamo's recompile limit
    "pytorch/bias_gelu_residual": [
        {"x": (r, c), "bias": (c,), "residual": (r, c)} for r, c in ((1, 1), (3, 5), (7, 1000), (129, 4096), (33, 1028))
    ],
    "pytorch/add_rmsnorm": [
        {"x": (r, c), "residual": (r, c), "weight": (c,)}
        for r, c in ((1, 8), (3, 5), (17, 100), (64, 1024), (9, 4099), (5, 4096))
    ],
    "pytorch/softmax": [{"x": s} for s in ((1, 1), (3, 5), (17, 31), (64, 1024), (5, 3000), (100, 4096))],
    "pytorch/gemm_bias_gelu": [
        {"a": (m, k), "b": (k, n), "bias": (n,)}
        for m, k, n in ((1, 8, 8), (3, 5, 7), (17, 100, 33), (129, 4096, 257), (1000, 1024, 1000))
    ],
    "pytorch/attention": [
        {"q": s, "k": s, "v": s} for s in ((1, 1, 1, 64), (2, 3, 17, 64), (1, 4, 129, 128), (2, 2, 1000, 128))
    ],
}


def _cases() -> list[tuple[str, Case]]:
    """Every case of the shipped suites; planted regressions are tests/test_gpu_mutants.py's."""
    suites = [load_suite(path) for path in sorted(SUITES.glob("*.yaml"))]
    return [(s.name, case) for s in suites if not s.planted for case in s.cases]


def test_every_shipped_case_is_covered() -> None:
    assert {f"{suite}/{case.id}" for suite, case in _cases()} == set(SHAPES)


def _random(spec, shape: tuple[int, ...], rng: np.random.Generator) -> Tensor:
    """Fresh random values of the input's distribution, as a tensor on the GPU in its dtype."""
    kind = dtype(spec.dtype)
    if spec.distribution == "uniform":
        values = rng.uniform(spec.low, spec.high, shape)
    elif spec.distribution == "randint":
        values = rng.integers(int(spec.low), int(spec.high), shape)
    else:
        values = rng.normal(spec.mean, spec.std, shape)
    if kind.minifloat is not None:
        return Tensor(arrays.upload(encode_host(values, kind.minifloat, kind.storage)), kind)
    return Tensor(arrays.upload(values.astype(spec.dtype)), kind)


def _calls(case: Case, root) -> tuple[dict[str, BoundCall], BoundCall]:
    search = [root]
    calls = {v.id: BoundCall(resolve(v.fn, search), arrays.get(v.framework), case.params, v.id) for v in case.variants}
    return calls, BoundCall(resolve(case.reference, search), arrays.get(case.framework), case.params, "reference")


@pytest.fixture(scope="module", autouse=True)
def _frameworks() -> None:
    for name in ("cupy", "torch"):
        arrays.get(name).load()
        arrays.get(name).start()


@pytest.mark.parametrize(("suite", "case"), _cases(), ids=lambda v: v if isinstance(v, str) else v.id)
def test_variants_match_float64_reference(suite: str, case: Case, root) -> None:
    rng = np.random.default_rng()  # fresh data on every run: the kernels must be right on any input
    calls, reference = _calls(case, root)
    for shapes in SHAPES[f"{suite}/{case.id}"]:
        inputs = {spec.name: _random(spec, shapes.get(spec.name, spec.shape), rng) for spec in case.inputs}
        expected = reference({k: arrays.float64_tensor(v) for k, v in inputs.items()})
        for vid, call in calls.items():
            got = call(inputs)
            assert len(got) == len(expected)
            for i, (g, e) in enumerate(zip(got, expected, strict=True)):
                assert g.shape == e.shape, (vid, shapes)
                rtol, atol = tolerances(case.correctness, g)
                d = arrays.compare(g, e, rtol, atol)
                assert d.mismatches == 0, f"{case.id}/{vid} output {i} at {shapes}: {d}"


@pytest.mark.parametrize(("suite", "case"), _cases(), ids=lambda v: v if isinstance(v, str) else v.id)
def test_reference_on_the_gpu_is_the_host_reference(suite: str, case: Case, root) -> None:
    """The harness evaluates references on the GPU in float64 (fuseci.harness.correctness): the same
    values as float64 on the host (NumPy, or PyTorch on the CPU), to far within any tolerance."""
    rng = np.random.default_rng()
    _, reference = _calls(case, root)
    shapes = SHAPES[f"{suite}/{case.id}"][-1]
    inputs = {spec.name: _random(spec, shapes.get(spec.name, spec.shape), rng) for spec in case.inputs}
    on_gpu = reference_outputs(case, reference, inputs)
    assert all(not o.on_host and o.dtype.name == "float64" for o in on_gpu), case.id  # ran on the GPU
    host = {k: arrays.host_float64(v) for k, v in inputs.items()}
    if case.framework == "torch":
        import torch

        expected = reference.fn(**{k: torch.from_numpy(v) for k, v in host.items()}, **case.params)
        expected = tuple(e.numpy() for e in (expected if isinstance(expected, tuple) else (expected,)))
    else:
        expected = reference.fn(**host, **case.params)
        expected = expected if isinstance(expected, tuple) else (expected,)
    for g, e in zip(on_gpu, expected, strict=True):
        np.testing.assert_allclose(arrays.host_float64(g), e, rtol=1e-12, atol=1e-12 * float(np.max(np.abs(e)) or 1.0))


def test_sensitivity_chains_are_calibrated_once_for_every_process(tmp_path, root, monkeypatch) -> None:
    """The profiled run and the timed pass (two processes) must measure the same time_P kernel."""
    import json
    import os
    import subprocess
    import sys

    spins = tmp_path / "spins.json"
    code = "import sys; from kernels.sensitivity import _spin_for; print(_spin_for(1 << 22, 10))"
    env = {**os.environ, "FUSECI_SENSITIVITY_SPINS": str(spins), "PYTHONPATH": str(root)}
    got = [
        int(
            subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=root
            ).stdout
        )
        for _ in range(2)
    ]
    kept = json.loads(spins.read_text())
    assert got[0] == got[1] > 0
    assert list(kept.values()) == [got[0]] and "|4194304|10|" in next(iter(kept))
