"""Array frameworks and the device, in one place: the only part of the harness that imports
CuPy, PyTorch or any other array library (:mod:`.device` chooses the runtime, :mod:`.frameworks`
hands inputs to a suite's functions and takes their outputs back, :mod:`.tensor` compares)."""

from fuseci.harness.arrays.device import (
    Event,
    affine,
    context_alive,
    copy,
    device_count,
    device_facts,
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
from fuseci.harness.arrays.device_cupy import cupy, elementwise_kernel
from fuseci.harness.arrays.device_errors import DeviceMemoryError
from fuseci.harness.arrays.frameworks import (
    Framework,
    compiler_keys_ready,
    get,
    take,
    warm_compiler_keys,
    watch_compiles,
)
from fuseci.harness.arrays.tensor import Tensor, compare, float64_tensor, from_array, host_float64, own_copy

__all__ = [
    "DeviceMemoryError",
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
