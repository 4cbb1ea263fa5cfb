"""Profile each launch configuration of a compiled forward once (a ledger's ``repeats: once``): while the
measured call runs, Inductor's wrapper modules' launchers are stood in for; a configuration's first launch runs in a
``fuseci-launch:R:N`` range, each later one in a ``fuseci-repeat:R:N`` range ncu leaves out, recorded as ``[N, M, R]``
(launch N in graph run R repeats launch M) for the report reader to count with M's (:mod:`fuseci.frames.repeats`)."""

from __future__ import annotations

import logging
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fuseci.config import names

log = logging.getLogger(__name__)

#: Address alignment a configuration holds each tensor to, in bytes (a cache line).
ALIGN = 128


@dataclass
class Launches:
    """What one measured call launched through the wrappers."""

    launches: int = 0
    """Launches counted (profiled and repeats)."""
    runs: int = 0
    """Runs of compiled graphs."""
    repeats: list[tuple[int, int, int]] = field(default_factory=list)
    """(launch, the earlier launch whose configuration it repeats, the graph run it is in), in
    launch order."""
    first: dict[Any, int] = field(default_factory=dict)
    """Each configuration's first launch."""
    nvtx: Any = None
    """The NVTX push/pop functions (``torch.cuda.nvtx``)."""

    def launch(self, where: Any, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        """Run ``fn(*args, **kwargs)`` inside its launch range (see the module docstring)."""
        n = self.launches
        self.launches += 1
        try:
            config = (where, _config(args), _config(tuple(sorted(kwargs.items()))))
            hash(config)
        except TypeError:  # an argument that cannot be hashed: its own configuration
            config = None
        twin = self.first.setdefault(config, n) if config is not None else n  # n: a first launch
        if twin != n:
            self.repeats.append((n, twin, self.runs))
        self.nvtx.range_push(names.launch_range(self.runs, n, repeat=twin != n))
        try:
            return fn(*args, **kwargs)
        finally:
            self.nvtx.range_pop()


def _config(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return ("tensor", value.dtype, value.device, tuple(value.shape), value.stride(), value.data_ptr() % ALIGN)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_config(x) for x in value))
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return (type(value).__name__, value)
    if isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return value
    return object()  # anything else: a configuration of its own (an id can be reused once freed)


class _Kernel:
    """Stands in for a Triton kernel object of a wrapper module: its ``run`` is a launch."""

    def __init__(self, kernel: Any, where: Any, launches: Launches) -> None:
        self._kernel, self._where, self._launches = kernel, where, launches

    def run(self, *args: Any, **kwargs: Any) -> Any:
        return self._launches.launch(self._where, self._kernel.run, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kernel, name)


class _Calls:
    """Stands in for a namespace of library calls (``extern_kernels``, ``torch.ops``): any chain of
    namespaces and callables, called, is a launch; any other attribute is handed out as it is."""

    def __init__(self, target: Any, where: tuple[Any, ...], launches: Launches) -> None:
        self._target, self._where, self._launches = target, where, launches

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value) and not isinstance(value, types.ModuleType):  # an op's schema, say: as it is
            return value
        return _Calls(value, (*self._where, name), self._launches)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._launches.launch(self._where, self._target, args, kwargs)


class _Torch:
    """Stands in for ``torch`` in a wrapper module: ``torch.ops`` through :class:`_Calls`."""

    def __init__(self, torch: Any, where: Any, launches: Launches) -> None:
        self._torch, self._ops = torch, _Calls(torch.ops, (where, "torch.ops"), launches)

    def __getattr__(self, name: str) -> Any:
        return self._ops if name == "ops" else getattr(self._torch, name)


def _wrappers() -> list[dict[str, Any]]:
    """The globals of every wrapper module Inductor has loaded in this process."""
    from torch._inductor.codecache import PyCodeCache

    modules = getattr(PyCodeCache, "modules", None)
    if not isinstance(modules, list):
        log.warning("Inductor keeps no list of its loaded modules here: every launch is profiled")
        return []
    return [m.__dict__ for m in modules if callable(getattr(m, "call", None))]


def _stand_ins(found: Mapping[str, Any], where: int, launches: Launches) -> dict[str, Any]:
    import torch
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    out: dict[str, Any] = {}
    for name, value in found.items():
        if isinstance(value, CachingAutotuner):
            out[name] = _Kernel(value, (where, name), launches)
        elif name == "extern_kernels":
            out[name] = _Calls(value, (where, name), launches)
        elif name == "torch" and value is torch:
            out[name] = _Torch(value, where, launches)
    return out


@contextmanager
def once_per_configuration() -> Iterator[Launches]:
    """Mark each launch of the compiled graphs loaded so far while the block runs; yields what was launched."""
    import torch
    from torch._inductor.output_code import CompiledFxGraph

    launches = Launches(nvtx=torch.cuda.nvtx)
    saved: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for index, scope in enumerate(_wrappers()):
        stand_ins = _stand_ins(scope, index, launches)
        saved.append((scope, {k: scope[k] for k in stand_ins}))
        scope.update(stand_ins)
    graph_call = CompiledFxGraph.__call__

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        launches.runs += 1
        return graph_call(self, *args, **kwargs)

    CompiledFxGraph.__call__ = counted
    try:
        yield launches
    finally:
        CompiledFxGraph.__call__ = graph_call
        for scope, originals in saved:
            scope.update(originals)
    log.debug("%d launches in %d graph runs, %d repeats", launches.launches, launches.runs, len(launches.repeats))
