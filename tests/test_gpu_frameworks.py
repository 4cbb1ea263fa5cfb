"""Array frameworks on a real GPU (fuseci.harness.arrays): PyTorch, Triton and JAX functions
need no glue; torch's launches run on the stream fuseci times; torch's caching
allocator is NaN-filled for the checks; a compilation inside a measured range is an error that
names the kernel. gpu-marked."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from fuseci.cli import app

pytestmark = pytest.mark.gpu

DATA = Path(__file__).resolve().parent / "data"


def _run(tmp_path: Path, root: Path, suite: Path, *more: str) -> tuple[int, str, dict]:
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        ["run", str(suite), "--baselines", str(tmp_path / "b"), "--report-dir", str(out),
         "--json", str(tmp_path / "r.json"), *more],
    )  # fmt: skip
    doc = json.loads((tmp_path / "r.json").read_text()) if (tmp_path / "r.json").exists() else {}
    return result.exit_code, result.output, doc


def _variants(doc: dict) -> dict[str, dict]:
    case = doc["suites"][0]["cases"][0]
    return {v["variant"]: v for v in case["variants"]}


def test_torch_and_triton_variants_need_no_glue_and_time_like_cupy(
    tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One suite: CuPy kernels, and eager PyTorch and Triton on torch tensors. Every variant
    checks right against the reference, and each
    single-kernel variant's CUDA-event time per call agrees with ncu's duration: the torch one
    as closely as the CuPy one (both launch on the stream fuseci times)."""
    monkeypatch.chdir(root)
    code, output, doc = _run(tmp_path, root, DATA / "suites" / "frameworks.yaml")
    assert code == 0, output
    v = _variants(doc)
    assert {k: v[k]["values"]["launches"] for k in v} == {
        "unfused": 3, "fused": 1, "torch_eager": 3, "triton": 1,
    }  # fmt: skip
    record = json.loads((tmp_path / "out" / "frameworks.harness.json").read_text())
    checks = record["cases"]["scale_relu_add"]["checks"]
    assert {(k["variant"], k["against"]) for k in checks if k["passed"]} >= {
        (vid, against) for vid in v for against in ("reference", "its first call")
    }
    assert record["env"]["torch_version"] and record["env"]["triton_version"]
    disagreement = {
        k: abs(v[k]["values"]["event_time"] / v[k]["values"]["gpu__time_duration.sum"] - 1) for k in ("fused", "triton")
    }
    print(f"CUDA-event time / ncu duration - 1: {disagreement}")
    assert disagreement["triton"] <= disagreement["fused"] + 0.05, disagreement
    assert all(d < 0.25 for d in disagreement.values()), disagreement


def test_an_output_torch_left_unwritten_reads_as_nan_and_says_so(
    tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch.empty_like from the caching allocator, half written: the other half holds the
    NaN the harness filled the allocator's memory with, and the message says it was never written."""
    monkeypatch.chdir(root)
    suite = tmp_path / "suites" / "half.yaml"
    suite.parent.mkdir()
    suite.write_text(
        (DATA / "suites" / "frameworks.yaml")
        .read_text()
        .replace("67108864", "1000003")
        .replace("fn: framework_kernels:scale_relu_add_torch", "fn: framework_kernels:half_written_torch")
    )
    (tmp_path / "framework_kernels.py").write_text((DATA / "framework_kernels.py").read_text())
    code, output, _ = _run(tmp_path, root, suite)
    assert code == 1, output
    assert "torch_eager output 0 vs reference: 500002 of 1000003 elements" in output, output
    assert "500002 elements NaN where the expected value is not: never written" in output


def test_a_compilation_inside_the_measured_range_is_an_error_naming_the_kernel(
    tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(root)
    suite = tmp_path / "suites" / "compiles.yaml"
    suite.parent.mkdir()
    text = (DATA / "suites" / "frameworks.yaml").read_text().replace("67108864", "1000003")
    text = text.replace("fn: framework_kernels:scale_relu_add_triton", "fn: framework_kernels:recompiling_triton")
    suite.write_text(text.replace("dram__bytes.sum: 1%", 'dram__bytes.sum: "off"\n    event_time: "off"'))
    (tmp_path / "framework_kernels.py").write_text((DATA / "framework_kernels.py").read_text())
    code, output, _ = _run(tmp_path, root, suite)
    assert code == 3, output
    assert "triton compiled inside its measured range (Triton compiled scale_relu_add_kernel)" in output, output


def test_torch_gets_views_of_fuseci_memory_on_fuseci_stream() -> None:
    import torch
    from philox import host_values

    from fuseci.config.model import InputSpec
    from fuseci.harness import arrays
    from fuseci.harness.arrays import minifloat
    from fuseci.harness.inputs import make_input

    framework = arrays.get("torch")
    framework.load()
    framework.start()
    assert torch.cuda.current_stream().cuda_stream == arrays.stream_handle()
    for name in ("bfloat16", "float8_e4m3fn", "float16"):
        spec = InputSpec("x", (4096,), name, "normal", seed=11)
        t = make_input(spec)
        handed = framework.hand(t)
        assert handed.dtype == getattr(torch, name) and handed.data_ptr() == t.data.data.ptr  # no copy
        want = host_values(spec)
        if t.dtype.minifloat is not None:
            want = minifloat.decode_host(want, t.dtype.minifloat)
        got = handed.to(torch.float64).cpu().numpy()
        assert np.mean(got == want.astype(np.float64)) > 0.99
        back = arrays.take(handed.clone(), "test")[0]  # a torch output comes back as fuseci's tensor
        assert back.dtype.name == name and np.array_equal(arrays.host_float64(back), got)


def test_the_compile_watch_sees_triton_and_nothing_on_a_warm_call() -> None:
    import torch
    from framework_kernels import recompiling_triton, scale_relu_add_triton  # tests/data, on sys.path below

    from fuseci.harness import arrays

    x = torch.randn(1 << 20, device="cuda")
    scale_relu_add_triton(x, x, 0.5)  # compiles
    with arrays.watch_compiles() as seen:
        scale_relu_add_triton(x, x, 0.5)
    assert seen == []
    recompiling_triton(x, x, 0.5)
    with arrays.watch_compiles() as seen:
        recompiling_triton(x, x, 0.5)
    assert any("scale_relu_add_kernel" in s for s in seen), seen


def test_a_jax_variant_runs_in_a_suite(tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """JAX, a DLPack producer with streams and threads of its own, end to end: checked right
    against the reference and its kernels profiled in its range."""
    pytest.importorskip("jax")
    monkeypatch.chdir(root)
    code, output, doc = _run(tmp_path, root, DATA / "suites" / "jax.yaml")
    assert code == 0, output
    v = _variants(doc)
    assert v["jax"]["values"]["launches"] >= 1, output
    record = json.loads((tmp_path / "out" / "jax.harness.json").read_text())
    assert all(k["passed"] for k in record["cases"]["scale_relu_add"]["checks"] if k["variant"] == "jax")


def test_a_jax_output_is_taken_back_over_dlpack() -> None:
    jax = pytest.importorskip("jax")
    import cupy as cp
    from framework_kernels import scale_relu_add_jax

    from fuseci.harness import arrays

    x = cp.random.default_rng(3).standard_normal(1 << 20, dtype=cp.float32)
    out = arrays.take(scale_relu_add_jax(x, x, 0.5), "jax")[0]
    assert out.dtype.name == "float32" and not out.on_host, jax.__version__
    want = np.maximum(0.5 * cp.asnumpy(x), 0) + cp.asnumpy(x)
    assert np.allclose(arrays.host_float64(out), want, rtol=1e-6)
    assert math.isclose(float(arrays.host_float64(out).sum()), float(want.sum()), rel_tol=1e-5)


@pytest.fixture(autouse=True)
def _data_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(DATA))
