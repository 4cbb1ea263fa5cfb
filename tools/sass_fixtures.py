"""Record the SASS fixtures of tests/data/sass (the README there says what each is).

Needs nvcc and cuobjdump/nvdisasm on PATH, no GPU and no CuPy (stood in by a stub)::

    python3 tools/sass_fixtures.py tests/data/sass
"""

from __future__ import annotations

import lzma
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_SCALAR = r"""
// The planted scalar build of the fused chain: one 4-byte load per input and element.
extern "C" __global__ void __launch_bounds__(256)
fuseci_scale_relu_add(const float* __restrict__ x_, const float* __restrict__ y_, float* __restrict__ out_,
                      const float alpha, const int n, const int n4) {
  const int stride = gridDim.x * blockDim.x;
  for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += stride)
    out_[idx] = fmaxf(alpha * x_[idx], 0.0f) + y_[idx];
}
"""

_TENSOR = r"""
// Tensor cores fed by asynchronous copies: one 16x16x16 half-precision tile per warp.
#include <mma.h>
#include <cuda_pipeline.h>
extern "C" __global__ void __launch_bounds__(32)
fuseci_tile_mma(const half* __restrict__ a, const half* __restrict__ b, float* __restrict__ c) {
  __shared__ __align__(16) half sa[256], sb[256];
  for (int i = threadIdx.x; i < 32; i += 32) {
    __pipeline_memcpy_async(sa + 8 * i, a + 8 * i, 16);
    __pipeline_memcpy_async(sb + 8 * i, b + 8 * i, 16);
  }
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncwarp();
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, nvcuda::wmma::row_major> fa;
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, half, nvcuda::wmma::col_major> fb;
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> fc;
  nvcuda::wmma::fill_fragment(fc, 0.0f);
  nvcuda::wmma::load_matrix_sync(fa, sa, 16);
  nvcuda::wmma::load_matrix_sync(fb, sb, 16);
  nvcuda::wmma::mma_sync(fc, fa, fb, fc);
  nvcuda::wmma::store_matrix_sync(c, fc, 16, nvcuda::wmma::mem_row_major);
}
"""


def _sources() -> dict[str, tuple[str, tuple[str, ...]]]:
    """name -> (CUDA source, extra nvcc options)."""
    cp = types.ModuleType("cupy")
    cp.ndarray = object  # type: ignore[attr-defined]
    cp.RawKernel = lambda *a, **k: None  # type: ignore[attr-defined]
    for t in ("float32", "int32", "int64", "float16"):
        setattr(cp, t, t)
    cp.cuda = types.SimpleNamespace()  # type: ignore[attr-defined]
    sys.modules.setdefault("cupy", cp)
    sys.path.insert(0, str(ROOT))
    from kernels import _cuda, elementwise, mutants

    heavy = "typedef int index_t;\n#define VECTORS 5\n#define MIN_BLOCKS 4\n" + mutants._REGISTER_HEAVY_SOURCE
    return {
        "scale_relu_add": (elementwise._SCALE_RELU_ADD.source("int"), ()),
        "scale_relu_add_scalar": (_SCALAR, ()),
        "rereads": (_cuda.PRELUDE + "typedef int index_t;\n" + mutants._REREADS_SOURCE, ()),
        "register_heavy": (heavy, ()),
        "register_heavy_spills": (heavy.replace("MIN_BLOCKS 4", "MIN_BLOCKS 8"), ()),
        "tile_mma": (_TENSOR, ()),
    }


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    cuobjdump, nvdisasm = shutil.which("cuobjdump"), shutil.which("nvdisasm")
    if not (cuobjdump and nvdisasm and shutil.which("nvcc")):
        sys.exit("needs nvcc, cuobjdump and nvdisasm on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (source, options) in _sources().items():
            cu, cubin = Path(tmp, f"{name}.cu"), Path(tmp, f"{name}.cubin")
            cu.write_text(source)
            subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-std=c++17", *options, "-o", cubin, cu], check=True)
            text = subprocess.run([cuobjdump, "-sass", "-res-usage", cubin], check=True, capture_output=True, text=True)
            (out / f"{name}.sass.xz").write_bytes(lzma.compress(text.stdout.encode()))
            if name == "scale_relu_add":
                (out / f"{name}.cubin").write_bytes(cubin.read_bytes())
                text = subprocess.run([nvdisasm, cubin], check=True, capture_output=True, text=True)
                (out / f"{name}.nvdisasm.xz").write_bytes(lzma.compress(text.stdout.encode()))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
