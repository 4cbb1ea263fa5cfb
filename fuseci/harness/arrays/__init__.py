"""Array frameworks and the device, in one place: the only part of the harness that imports
CuPy, PyTorch or any other array library.

- :mod:`.device`: fuseci's own device runtime (inputs, comparisons, probes, events, NVTX
  ranges, the memory pool, the device's facts): CuPy (:mod:`.device_cupy`), or PyTorch alone
  (:mod:`.device_torch`, with :mod:`.philox_triton`) where CuPy is not installed;
- :mod:`.frameworks`: the frameworks a suite's functions take their inputs in (CuPy, PyTorch),
  outputs taken back from any DLPack or CUDA Array Interface producer, and the watch for
  compilations (Triton, Inductor, ``torch.compile``);
- :mod:`.tensor`: a tensor as fuseci holds it, its float64 values and comparisons;
- :mod:`.minifloat`: bfloat16 and float8 as raw bits.
"""

from fuseci.harness.arrays.device import (
    Event,
    affine,
    context_alive,
    copy,
    cupy,
    device_count,
    device_facts,
    elementwise_kernel,
    empty,
    free_pool,
    nvtx_range,
    open_context,
    runtime,
    runtime_name,
    spinner,
    start_driver,
    stream_handle,
    synchronize,
    upload,
)
from fuseci.harness.arrays.device_errors import DeviceMemoryError
from fuseci.harness.arrays.frameworks import (
    POISON_BYTE,
    Framework,
    compiler_keys_ready,
    get,
    take,
    warm_compiler_keys,
    watch_compiles,
)
from fuseci.harness.arrays.tensor import (
    Difference,
    Tensor,
    compare,
    float64_tensor,
    from_array,
    host_float64,
    own_copy,
)

__all__ = [
    "POISON_BYTE",
    "DeviceMemoryError",
    "Difference",
    "Event",
    "Framework",
    "Tensor",
    "affine",
    "compare",
    "compiler_keys_ready",
    "context_alive",
    "copy",
    "cupy",
    "device_count",
    "device_facts",
    "elementwise_kernel",
    "empty",
    "float64_tensor",
    "free_pool",
    "from_array",
    "get",
    "host_float64",
    "nvtx_range",
    "open_context",
    "own_copy",
    "runtime",
    "runtime_name",
    "spinner",
    "start_driver",
    "stream_handle",
    "synchronize",
    "take",
    "upload",
    "warm_compiler_keys",
    "watch_compiles",
]
