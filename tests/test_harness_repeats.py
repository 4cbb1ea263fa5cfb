"""The harness side of ``repeats: once`` without PyTorch: fuseci/harness/arrays/launch_ranges.py
driven through a stand-in ``torch`` that has just what it reads (tensors, NVTX, Inductor's
loaded modules, its kernel and graph classes). What a launch's configuration is, which launches
repeat, the ranges pushed around each, and that every stand-in is put back."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from fuseci.config import names


class Tensor:
    def __init__(self, shape: tuple[int, ...], ptr: int, dtype: str = "bf16") -> None:
        self.shape, self.ptr, self.dtype, self.device = shape, ptr, dtype, "cuda:0"

    def stride(self) -> tuple[int, ...]:
        out, step = [], 1
        for n in reversed(self.shape):
            out.insert(0, step)
            step *= n
        return tuple(out)

    def data_ptr(self) -> int:
        return self.ptr


class CachingAutotuner:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def run(self, *args: Any, stream: int = 0) -> None:
        self.log.append(f"launch {self.name}")


class Packet:
    """An op's packet: callable, its overloads attributes, its schema a plain value."""

    schema = "sdpa(Tensor q)"

    def __init__(self, default: Any) -> None:
        self.default = default

    def __call__(self, *args: Any) -> Any:
        return self.default(*args)


class CompiledFxGraph:
    def __init__(self, call: Any) -> None:
        self.call = call

    def __call__(self, inputs: list[Any]) -> Any:
        return self.call(inputs)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A stand-in torch, and a wrapper module as Inductor writes one: two Triton kernels, a GEMM
    through ``extern_kernels`` and an attention op through ``torch.ops``."""
    log: list[str] = []
    torch = types.ModuleType("torch")
    torch.Tensor = Tensor  # type: ignore[attr-defined]
    for name in ("dtype", "device", "layout", "memory_format"):
        setattr(torch, name, type(name, (), {}))
    nvtx = types.SimpleNamespace(range_push=lambda n: log.append(f"push {n}"), range_pop=lambda: log.append("pop"))
    torch.cuda = types.SimpleNamespace(nvtx=nvtx)  # type: ignore[attr-defined]
    ops = types.ModuleType("torch.ops")
    ops.aten = types.ModuleType("torch.ops.aten")  # type: ignore[attr-defined]
    ops.aten.sdpa = Packet(lambda *a: log.append("launch sdpa"))  # type: ignore[attr-defined]
    torch.ops = ops  # type: ignore[attr-defined]
    extern = types.SimpleNamespace(addmm=lambda *a, out=None: log.append("launch addmm"))
    wrapper = types.ModuleType("wrapper")
    norm, gelu = CachingAutotuner("norm", log), CachingAutotuner("gelu", log)
    x, w = Tensor((8, 64), 0), Tensor((64, 64), 4096)

    def call(inputs: list[Any]) -> None:
        g = wrapper.__dict__
        for layer in range(2):
            out = Tensor((8, 64), 8192 + 1024 * layer)
            g["triton_norm"].run(x, out, 512, stream=0)
            g["extern_kernels"].addmm(w, out, w, out=out)
            assert g["torch"].ops.aten.sdpa.schema == "sdpa(Tensor q)"  # not a call: handed out as it is
            g["torch"].ops.aten.sdpa.default(out, out, out)
        g["triton_gelu"].run(Tensor((8, 64), 64), 512, stream=0)  # another alignment: its own configuration

    wrapper.__dict__.update(triton_norm=norm, triton_gelu=gelu, extern_kernels=extern, torch=torch, call=call)
    codecache = types.SimpleNamespace(PyCodeCache=types.SimpleNamespace(modules=[wrapper]))
    modules = {
        "torch": torch,
        "torch._inductor": types.ModuleType("torch._inductor"),
        "torch._inductor.codecache": codecache,
        "torch._inductor.runtime": types.ModuleType("torch._inductor.runtime"),
        "torch._inductor.runtime.triton_heuristics": types.SimpleNamespace(CachingAutotuner=CachingAutotuner),
        "torch._inductor.output_code": types.SimpleNamespace(CompiledFxGraph=CompiledFxGraph),
    }
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    return {"log": log, "wrapper": wrapper, "graph": CompiledFxGraph(call), "torch": torch}


def test_each_configuration_is_profiled_once_and_its_repeats_named(fake: dict[str, Any]) -> None:
    from fuseci.harness.arrays import launch_ranges

    before = dict(fake["wrapper"].__dict__)
    with launch_ranges.once_per_configuration() as launches:
        fake["graph"]([])
        fake["graph"]([])
    # per run: norm, addmm, sdpa for two layers, then gelu; 7 launches a run, two runs
    assert launches.launches == 14 and launches.runs == 2
    # layer 2's norm writes another address, 1024 bytes on (a multiple of 128): the same configuration
    # run 2 repeats run 1, each launch named after its configuration's first launch
    first = [0, 1, 2, 0, 1, 2, 6]
    assert launches.repeats == [(3, 0, 1), (4, 1, 1), (5, 2, 1)] + [(7 + i, first[i], 2) for i in range(7)]
    pushed = [x.removeprefix("push ") for x in fake["log"] if x.startswith("push ")]
    assert pushed[:7] == [
        names.launch_range(1, 0), names.launch_range(1, 1), names.launch_range(1, 2),
        names.launch_range(1, 3, repeat=True), names.launch_range(1, 4, repeat=True),
        names.launch_range(1, 5, repeat=True), names.launch_range(1, 6),
    ]  # fmt: skip
    assert fake["log"].count("pop") == len(pushed) == 14
    assert [x for x in fake["log"] if x.startswith("launch")][:7] == [
        "launch norm", "launch addmm", "launch sdpa", "launch norm", "launch addmm", "launch sdpa", "launch gelu",
    ]  # fmt: skip
    assert fake["wrapper"].__dict__ == before
    assert CompiledFxGraph.__call__ is fake["graph"].__class__.__call__
    assert "counted" not in CompiledFxGraph.__call__.__qualname__


def test_an_unhashable_or_unknown_argument_is_a_configuration_of_its_own(fake: dict[str, Any]) -> None:
    from fuseci.harness.arrays import launch_ranges

    launches = launch_ranges.Launches(nvtx=fake["torch"].cuda.nvtx)
    ran: list[int] = []
    for _ in range(2):
        launches.launch("k", lambda *a, **k: ran.append(1), ({"a": 1},), {})  # a dict: unhashable
        launches.launch("k", lambda *a, **k: ran.append(1), (object(),), {})  # another object each time
    assert len(ran) == 4 and launches.repeats == []
    launches.launch("k", lambda *a, **k: ran.append(1), (1.5, None, "x"), {"alpha": 1})
    launches.launch("k", lambda *a, **k: ran.append(1), (1.5, None, "x"), {"alpha": 1})
    launches.launch("k", lambda *a, **k: ran.append(1), (1.5, None, "x"), {"alpha": 2})
    assert launches.repeats == [(5, 4, 0)]


def test_everything_is_put_back_when_the_forward_raises(fake: dict[str, Any]) -> None:
    from fuseci.harness.arrays import launch_ranges

    before = dict(fake["wrapper"].__dict__)
    original = CompiledFxGraph.__call__
    with pytest.raises(RuntimeError, match="boom"), launch_ranges.once_per_configuration():
        fake["wrapper"].__dict__["triton_norm"].run(Tensor((1,), 0), stream=0)
        raise RuntimeError("boom")
    assert fake["wrapper"].__dict__ == before and CompiledFxGraph.__call__ is original
    assert fake["log"][-1] == "pop"
