"""The array frameworks a suite's functions take their inputs in (:class:`Framework`), the
outputs taken back from any producer (:func:`take`), and the compilers watched
(:func:`watch_compiles`) and warmed up (:func:`warm_compiler_keys`)."""

from __future__ import annotations

import importlib
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from fuseci.config.dtypes import DTYPES, FRAMEWORKS
from fuseci.errors import HarnessError
from fuseci.harness.arrays import device, device_cupy
from fuseci.harness.arrays.tensor import Tensor, from_array

log = logging.getLogger(__name__)

#: The byte every poisoned allocation is filled with: NaN in every float format, -1 in signed integers.
POISON_BYTE = 0xFF


class Framework:
    """CuPy: fuseci's own arrays, handed over as they are."""

    name = "cupy"
    #: What a function of this framework receives, for messages.
    arrays = "CuPy arrays"

    def load(self) -> None:
        """Import the framework (before the GPU's turn: imports take seconds).

        Raises:
            HarnessError: it is not installed.
        """
        device_cupy.cupy()

    def start(self) -> None:
        """Set the framework up in this process's turn on the GPU, the CUDA context made."""

    def versions(self) -> dict[str, str]:
        """Environment fingerprint fields of the framework (CuPy's are the device's)."""
        return {}

    def hand(self, t: Tensor) -> Any:
        """``t`` as this framework's array, on the same memory."""
        return t.data if device.runtime_name() == "cupy" else device_cupy.cupy().from_dlpack(t.data)

    def before_call(self) -> None:
        """Called before each call of a function of this framework."""

    @contextmanager
    def poisoned(self, reserve_bytes: int) -> Iterator[list[str]]:
        """Every allocation the framework makes while the block runs is filled with
        :data:`POISON_BYTE`; yields a list the block's end fills with what was not."""
        with device.poisoned_pool(POISON_BYTE):
            yield []

    def free(self) -> None:
        """Give cached device memory back to the driver."""
        device.free_pool()

    def track_peak(self) -> Callable[[], int]:
        """A function telling the most device memory the allocator held at once from now on beyond
        what it holds now (0 where the framework cannot tell)."""
        return lambda: 0


class Torch(Framework):
    """PyTorch: tensors on fuseci's memory (DLPack, no copy); ``torch.compile`` and Triton."""

    name = "torch"
    arrays = "torch tensors"

    def _torch(self) -> Any:
        try:
            import torch
        except ImportError as exc:
            raise HarnessError(
                f"a suite function takes torch tensors (framework: torch) but PyTorch is not installed ({exc}); "
                "install fuseci with the torch extra"
            ) from None
        return torch

    def load(self) -> None:
        torch = self._torch()
        if device.runtime_name() != "cpu" and not torch.cuda.is_available():
            raise HarnessError(f"PyTorch {torch.__version__} has no CUDA (a CPU build?); install a CUDA build")
        try:  # torch.compile's code generator; importing it now saves a second in the GPU's turn
            importlib.import_module("triton")
        except ImportError:
            log.debug("triton is not installed")

    def start(self) -> None:
        torch = self._torch()
        if device.runtime_name() == "cpu":  # fuseci check --execute: CPU tensors, no stream
            return
        torch.cuda.init()
        handle = device.stream_handle()
        current = torch.cuda.current_stream()
        if current.cuda_stream != handle:
            torch.cuda.set_stream(torch.cuda.default_stream() if handle == 0 else torch.cuda.ExternalStream(handle))
        log.debug("torch launches on stream %#x, the stream fuseci times", torch.cuda.current_stream().cuda_stream)

    def versions(self) -> dict[str, str]:
        torch = self._torch()
        out = {"torch_version": str(torch.__version__)}
        triton = sys.modules.get("triton")
        if triton is not None:
            out["triton_version"] = str(getattr(triton, "__version__", "unknown"))
        return out

    def hand(self, t: Tensor) -> Any:
        torch = self._torch()
        if isinstance(t.data, torch.Tensor):  # the PyTorch runtime's own tensor
            return t.data.view(getattr(torch, t.dtype.name)) if t.dtype.minifloat is not None else t.data
        if t.dtype.minifloat is None:
            return torch.from_dlpack(t.data)
        bits = t.data.view("int16" if t.dtype.itemsize == 2 else "int8")  # DLPack carries signed bits everywhere
        return torch.from_dlpack(bits).view(getattr(torch, t.dtype.name))

    def before_call(self) -> None:
        if "torch._inductor.cudagraph_trees" in sys.modules:
            # torch.compile(mode="reduce-overhead"): each call is a new step of its CUDA graphs
            self._torch().compiler.cudagraph_mark_step_begin()

    @contextmanager
    def poisoned(self, reserve_bytes: int) -> Iterator[list[str]]:
        """Fill what torch's caching allocator can hand out with NaN bytes: the cache is emptied,
        ``reserve_bytes`` (the variant's peak) taken into it, and every free byte filled; the list
        names what was not (new memory taken from CUDA, expandable segments)."""
        torch = self._torch()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        if reserve_bytes > 0:
            torch.empty(reserve_bytes, dtype=torch.uint8, device="cuda")  # freed at once, cached
        # small allocations (<= 1 MiB) come from a pool of their own, in 2 MiB segments
        held = [torch.empty(1 << 20, dtype=torch.uint8, device="cuda") for _ in range(16)]
        del held
        filled, expandable = 0, 0
        for segment in torch.cuda.memory_snapshot():
            address = int(segment.get("address", 0))
            if segment.get("is_expandable"):  # its free parts may be unmapped: never written to
                expandable += int(segment.get("total_size", 0)) - int(segment.get("allocated_size", 0))
                continue
            for block in segment.get("blocks", ()):
                size = int(block.get("size", 0))
                start = int(block.get("address", address))
                if block.get("state") == "inactive" and size > 0:
                    device.memset(start, POISON_BYTE, size)
                    filled += size
                address = start + size
        device.synchronize()
        before = _segment_bytes(torch)
        unpoisoned: list[str] = []
        if expandable > 0:
            unpoisoned.append(
                f"{expandable / 1e6:,.1f} MB free in torch's expandable segments (PYTORCH_CUDA_ALLOC_CONF) not NaN-filled"
            )
        with device.poisoned_pool(POISON_BYTE):
            yield unpoisoned
        grew = _segment_bytes(torch) - before
        if grew > 0:
            unpoisoned.append(
                f"torch's caching allocator took {grew / 1e6:,.1f} MB new from CUDA during the call (not NaN-filled)"
            )
        log.debug("torch cache: %d bytes NaN-filled, %d bytes taken new", filled, max(grew, 0))

    def free(self) -> None:
        super().free()
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.cuda.empty_cache()

    def track_peak(self) -> Callable[[], int]:
        torch = self._torch()
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        return lambda: max(int(torch.cuda.max_memory_allocated()) - base, 0)


@contextmanager
def watch_compiles() -> Iterator[list[str]]:
    """Yields a list that, when the block ends, names each Triton kernel compiled, each Triton or
    Inductor autotuning and each ``torch.compile`` frame compiled in it (of what is already imported)."""
    seen: list[str] = []
    with ExitStack() as stack:
        stack.enter_context(_triton_compile_hook(seen))
        stack.enter_context(_patched(sys.modules.get("triton.runtime.autotuner"), "Autotuner", "_bench", seen))
        stack.enter_context(
            _patched(
                sys.modules.get("torch._inductor.runtime.triton_heuristics"),
                "CachingAutotuner",
                "benchmark_all_configs",
                seen,
            )
        )
        frames = _dynamo_frames()
        yield seen
        compiled = _dynamo_frames() - frames
        if compiled > 0:
            seen.append(f"torch.compile: {compiled} frame(s) compiled (a recompilation)")


#: The hashes of their own installed files that Triton and Inductor compute once per process, at
#: their first compile, for every cache key (no GPU needed; cached by their modules).
COMPILER_KEYS = (("triton.runtime.cache", "triton_key"), ("torch._inductor.codecache", "torch_key"))

_key_threads: list[threading.Thread] = []


def warm_compiler_keys() -> None:
    """Compute :data:`COMPILER_KEYS` of the compilers already imported in a thread of its own (once
    per process), while the GPU is prepared; a key that fails is left for the compile that needs it."""
    keys = [
        (f"{module}.{name}", fn)
        for module, name in COMPILER_KEYS
        if callable(fn := getattr(sys.modules.get(module), name, None))
    ]
    if not keys or _key_threads:
        return

    def compute() -> None:
        for what, fn in keys:
            try:
                fn()
            except Exception as exc:  # the first compile computes it again, and says what is wrong
                log.debug("%s failed: %s", what, exc)

    thread = threading.Thread(target=compute, name="fuseci-compiler-keys", daemon=True)
    thread.start()
    _key_threads.append(thread)
    log.debug("hashing the compilers' cache keys: %s", ", ".join(what for what, _ in keys))


def compiler_keys_ready(timeout_s: float = 120.0) -> None:
    """Wait for :func:`warm_compiler_keys`, before any variant is called."""
    for thread in _key_threads:
        if thread.is_alive():
            thread.join(timeout_s)
            log.debug("compilers' cache keys ready")


def _segment_bytes(torch: Any) -> int:
    """Bytes torch's caching allocator has taken from CUDA, ever (cumulative)."""
    stats = torch.cuda.memory_stats()
    return int(stats.get("reserved_bytes.all.allocated", 0))


def _dynamo_frames() -> int:
    """Frames ``torch.compile`` has compiled in this process (each recompilation is one)."""
    utils = sys.modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", None)
    try:
        return int(counters["frames"]["total"]) if counters is not None else 0
    except (KeyError, TypeError, ValueError):
        return 0


def _kernel_name(kwargs: dict[str, Any]) -> str:
    """The kernel's name as ncu shows it: the function's own name, not its qualified one."""
    fn = kwargs.get("fn")
    for attr in ("name", "__name__"):
        name = getattr(fn, attr, None)
        if isinstance(name, str):
            return name.rsplit(".", 1)[-1]
    return str(kwargs.get("repr", "a Triton kernel"))[:200]


@contextmanager
def _triton_compile_hook(seen: list[str]) -> Iterator[None]:
    """Chain a Triton post-compile hook that notes each kernel compiled in this process."""
    knobs = getattr(sys.modules.get("triton"), "knobs", None)
    runtime = getattr(knobs, "runtime", None)
    if runtime is None or not hasattr(runtime, "jit_post_compile_hook"):
        yield
        return
    previous = runtime.jit_post_compile_hook

    def hook(*args: Any, **kwargs: Any) -> Any:
        seen.append(f"Triton compiled {_kernel_name(kwargs)}")
        return previous(*args, **kwargs) if previous is not None else None

    runtime.jit_post_compile_hook = hook
    try:
        yield
    finally:
        runtime.jit_post_compile_hook = previous


@contextmanager
def _patched(module: Any, cls_name: str, method: str, seen: list[str]) -> Iterator[None]:
    """Note each call of ``cls_name.method`` (an autotuner's benchmarking) while the block runs."""
    cls = getattr(module, cls_name, None)
    original: Callable[..., Any] | None = getattr(cls, method, None)
    if cls is None or original is None:
        yield
        return

    def noted(self: Any, *args: Any, **kwargs: Any) -> Any:
        fn = getattr(self, "base_fn", None) or getattr(self, "fn", None)
        name = (
            getattr(fn, "__name__", None)
            or getattr(fn, "name", None)
            or getattr(self, "inductor_meta", {}).get("kernel_name", cls_name)
        )
        seen.append(f"{cls_name} autotuned {name}")
        return original(self, *args, **kwargs)

    setattr(cls, method, noted)
    try:
        yield
    finally:
        setattr(cls, method, original)


_BY_NAME: dict[str, Framework] = {"cupy": Framework(), "torch": Torch()}
assert tuple(_BY_NAME) == FRAMEWORKS


def get(name: str) -> Framework:
    """The framework a suite calls ``name``.

    Raises:
        HarnessError: no such framework.
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        raise HarnessError(f"unknown array framework {name!r}; choose one of {', '.join(FRAMEWORKS)}") from None


def take(value: Any, who: str) -> tuple[Tensor, ...]:
    """A function's outputs (an array or a tuple or list of them) as tensors, on the same memory:
    CuPy and NumPy arrays, torch tensors, any DLPack or CUDA Array Interface producer.

    Raises:
        HarnessError: an output is none of these, or lives where fuseci cannot read it.
    """
    outs = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not outs:
        raise HarnessError(f"{who} returned no output; return an array or a tuple of arrays")
    return tuple(_take_one(o, f"{who} output {i}") for i, o in enumerate(outs))


_ACCEPTED = (
    "return an array or tensor (CuPy, PyTorch, or any DLPack or CUDA Array Interface producer: JAX, Numba, "
    "Warp, CuTe...) or a tuple of them"
)


def _take_one(o: Any, who: str) -> Tensor:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(o, torch.Tensor):
        return _take_torch(o, who)
    root = type(o).__module__.split(".")[0]
    if root in ("cupy", "numpy") and hasattr(o, "dtype") and hasattr(o, "view"):
        return from_array(o)
    if hasattr(o, "__dlpack__") and hasattr(o, "__dlpack_device__"):
        return _take_dlpack(o, who)
    if hasattr(o, "__cuda_array_interface__"):
        try:
            return from_array(device.runtime().from_cuda_array_interface(o))
        except Exception as exc:  # a malformed interface: any producer may get it wrong
            raise HarnessError(f"{who}: cannot read its CUDA Array Interface ({type(exc).__name__}: {exc})") from None
    raise HarnessError(f"{who} is {type(o).__name__}; {_ACCEPTED}")


def _take_torch(o: Any, who: str) -> Tensor:
    torch = sys.modules["torch"]
    on_host = device.runtime_name() == "cpu"  # fuseci check --execute: the inputs were CPU tensors
    if o.device.type != ("cpu" if on_host else "cuda"):
        where = "on the host, as its inputs are" if on_host else "on the GPU (device='cuda')"
        raise HarnessError(f"{who} is a torch tensor on {o.device}; return it {where}")
    if o.is_sparse or o.is_quantized or o.is_complex():
        raise HarnessError(f"{who} is a {o.layout} {o.dtype} torch tensor; return a dense real tensor")
    t = o.detach()  # DLPack refuses tensors that require grad
    name = str(t.dtype).removeprefix("torch.")
    known = DTYPES.get(name)
    if device.runtime_name() in ("torch", "cpu"):
        return from_array(t)
    if known is not None and known.minifloat is not None:
        bits = t.view(torch.int16 if known.itemsize == 2 else torch.int8)
        return Tensor(device_cupy.cupy().from_dlpack(bits).view(known.storage), known)
    if t.dtype == torch.bool:
        t = t.view(torch.uint8)
    try:
        return from_array(device_cupy.cupy().from_dlpack(t))
    except Exception as exc:  # a dtype DLPack has no code for
        raise HarnessError(f"{who}: a {t.dtype} torch tensor cannot be read ({type(exc).__name__}: {exc})") from None


def _take_dlpack(o: Any, who: str) -> Tensor:
    try:
        kind, _ = o.__dlpack_device__()
    except Exception as exc:  # a producer whose protocol is broken
        raise HarnessError(f"{who}: __dlpack_device__ failed ({type(exc).__name__}: {exc})") from None
    if int(kind) == 1:  # kDLCPU
        import numpy as np

        return from_array(np.from_dlpack(o))
    try:
        return from_array(device.runtime().from_dlpack(o))
    except Exception as exc:  # a dtype CuPy has no type for (bfloat16, float8)? PyTorch has
        torch = sys.modules.get("torch")
        if torch is not None:
            try:
                return _take_torch(torch.from_dlpack(o), who)
            except Exception:  # torch could not either: say what CuPy said
                log.debug("torch.from_dlpack failed too for %s", who, exc_info=True)
        raise HarnessError(
            f"{who}: a {type(o).__name__} that DLPack cannot hand over ({type(exc).__name__}: {exc})"
        ) from None
