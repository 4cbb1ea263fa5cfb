"""Inductor's wrapper (the ``inductor_output_code`` artifact): the calls its ``call()`` makes, in order, read with
:mod:`ast`, never run. A call is a Triton launch (``triton_poi_fused_add_view_3.run(buf18, arg0_1, ...)``) or a
library call (``extern_kernels.addmm(..., out=buf4)``), with its provenance debug handle, its source-node comment, and
the buffers it reads (Triton ``in_ptr0``; library: all else) and writes (``out_ptr0``, ``in_out_ptr0`` both; library:
``out=`` and what it returns), resolved through ``reinterpret_tensor`` and reuse to their allocations. Under CUDA
graphs a partition's calls are read where ``call()`` runs it (``self.partitions[0](...)``)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

from fuseci.errors import LedgerError
from fuseci.ledger.graph import ITEMSIZE, TORCH_DTYPES
from fuseci.records.fusion import Kind

_HANDLE = re.compile(r"#\s*\[Provenance debug handles\]\s*(\S+)")
#: What Inductor writes between a call's comments and the call: its stream, and with dynamic
#: shapes each symbolic size of the launch (``triton_per_fused_0_xnumel = s27*s77``).
_BETWEEN = re.compile(r"^(?:#|stream\w*\s*=|\w+numel\s*=)")
_SOURCES = re.compile(r"#\s*Topologically Sorted Source Nodes:\s*\[(?P<nodes>[^\]]*)\]")
_SIGNATURE = re.compile(r"^def \w+\((?P<params>[^)]*)\)", re.M)
_EXTERN = ("extern_kernels.", "torch.ops.", "aten.")


@dataclass(frozen=True, slots=True)
class Call:
    """One call of the wrapper's ``call()``."""

    kernel: str
    """The Triton kernel's name, or the library call as written (``extern_kernels.addmm``)."""
    kind: Kind
    """:attr:`Kind.TRITON` or :attr:`Kind.EXTERN`."""
    handle: str | None
    """Its provenance debug handle (``extern_kernels.addmm:2``), None when the wrapper gives none."""
    reads: tuple[str, ...]
    """The buffers and graph inputs it reads, each resolved to its allocation."""
    writes: tuple[str, ...]
    """The buffers it writes, likewise."""
    sources: tuple[str, ...] = ()
    """The pre-grad source nodes the wrapper's comment names (``layer_norm``)."""

    @property
    def op(self) -> str:
        """A library call's op name as the profiler's ``aten::`` ranges name it (``addmm``;
        ``scale`` for ``torch.ops.fuseci_probe.scale.default``); the kernel's name for Triton."""
        if self.kind is Kind.TRITON:
            return self.kernel
        parts = self.kernel.split(".")
        if parts[0] == "extern_kernels":
            return parts[-1]
        if parts[:2] == ["torch", "ops"]:
            parts = parts[2:]
        return parts[1] if len(parts) > 1 else parts[0]


@dataclass(frozen=True, slots=True)
class Wrapper:
    """A wrapper's calls and what it returns."""

    calls: tuple[Call, ...]
    returns: tuple[str, ...]
    """The allocations of the tensors it returns."""
    sizes: dict[str, int]
    """The bytes of each buffer ``call()`` allocates (``empty_strided_cuda``) whose size it spells out."""


def _signatures(tree: ast.Module) -> dict[str, tuple[str, ...]]:
    """Each Triton kernel's parameter names, from its source string in
    ``name = async_compile.triton('name', '''...''')``."""
    out: dict[str, tuple[str, ...]] = {}
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)):
            continue
        if ast.unparse(stmt.value.func) != "async_compile.triton" or len(stmt.value.args) < 2:
            continue
        name, source = stmt.value.args[0], stmt.value.args[1]
        if isinstance(name, ast.Constant) and isinstance(source, ast.Constant) and isinstance(source.value, str):
            m = _SIGNATURE.search(source.value)
            if m:
                params = (p.split(":")[0].strip() for p in m["params"].split(","))
                out[str(name.value)] = tuple(p for p in params if p)
    return out


def _body(stmts: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of ``call()``, ``with`` and ``if`` blocks flattened, in order."""
    for stmt in stmts:
        if isinstance(stmt, (ast.With, ast.If)):
            yield from _body(stmt.body)
            if isinstance(stmt, ast.If):
                yield from _body(stmt.orelse)
        else:
            yield stmt


class _Buffers:
    """Which allocation each name of ``call()`` lies in (``reinterpret_tensor``, reuse, ``x[0]``),
    and the bytes of those it allocates."""

    def __init__(self) -> None:
        self.alias: dict[str, str] = {}
        self.sizes: dict[str, int] = {}

    def allocate(self, name: str, value: ast.Call) -> None:
        """``name = empty_strided_cuda((sizes), (strides), torch.dtype)``: its bytes."""
        try:
            shape, strides = (ast.literal_eval(a) for a in value.args[:2])
            dtype = ast.unparse(value.args[2]).removeprefix("torch.")
        except (ValueError, TypeError, SyntaxError, IndexError):
            return
        itemsize = ITEMSIZE.get(TORCH_DTYPES.get(dtype, ""))
        if not (itemsize and isinstance(shape, tuple) and isinstance(strides, tuple) and len(shape) == len(strides)):
            return
        if all(isinstance(x, int) for x in (*shape, *strides)):
            span = 0 if 0 in shape else 1 + sum((n - 1) * st for n, st in zip(shape, strides, strict=True))
            self.sizes[name] = span * itemsize

    def base(self, name: str) -> str:
        seen = 0
        while name in self.alias and seen < 10_000:
            name, seen = self.alias[name], seen + 1
        return name

    def of(self, expr: ast.expr) -> str | None:
        """The allocation an argument lies in, or None for a number, a string, ``None``."""
        if isinstance(expr, ast.Name):
            return self.base(expr.id)
        if isinstance(expr, ast.Call) and ast.unparse(expr.func) == "reinterpret_tensor" and expr.args:
            return self.of(expr.args[0])
        if isinstance(expr, ast.Subscript):
            return self.of(expr.value)
        return None

    def bind(self, name: str, value: ast.expr) -> None:
        """``name = value``: an alias when the value is a view of a buffer."""
        base = self.of(value)
        if base is not None and base != name:
            self.alias[name] = base


def _comments(lines: list[str], lineno: int) -> tuple[str | None, tuple[str, ...]]:
    """The provenance handle and source-node comments just above line ``lineno``."""
    handle: str | None = None
    sources: tuple[str, ...] = ()
    i = lineno - 2
    while i >= 0 and _BETWEEN.match(text := lines[i].strip()):
        if (m := _HANDLE.search(text)) and handle is None:
            handle = m.group(1)
        elif (m := _SOURCES.search(text)) and not sources:
            sources = tuple(s.strip() for s in m["nodes"].split(",") if s.strip())
        i -= 1
    return handle, sources


def _call(stmt: ast.stmt, buffers: _Buffers, signatures: dict[str, tuple[str, ...]]) -> Call | None:
    target = None
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        target, value = stmt.targets[0].id, stmt.value
    elif isinstance(stmt, ast.Expr):
        value = stmt.value
    else:
        return None
    if not isinstance(value, ast.Call):
        if target is not None:
            buffers.bind(target, value)
        return None
    func = ast.unparse(value.func)
    if isinstance(value.func, ast.Attribute) and value.func.attr == "run" and isinstance(value.func.value, ast.Name):
        name = value.func.value.id
        reads: list[str] = []
        writes: list[str] = []
        params = signatures.get(name, ())
        for i, arg in enumerate(value.args):
            base = buffers.of(arg)
            if base is None:
                continue
            param = params[i] if i < len(params) else "in_out_ptr"  # unknown: read and written
            if param.startswith(("in_ptr", "in_out_ptr")):
                reads.append(base)
            if param.startswith(("out_ptr", "in_out_ptr")):
                writes.append(base)
        return Call(name, Kind.TRITON, None, tuple(dict.fromkeys(reads)), tuple(dict.fromkeys(writes)))
    if func.startswith(_EXTERN):
        reads = [b for a in value.args if (b := buffers.of(a)) is not None]
        reads += [b for k in value.keywords if k.arg != "out" and (b := buffers.of(k.value)) is not None]
        writes = [b for k in value.keywords if k.arg == "out" and (b := buffers.of(k.value)) is not None]
        if target is not None:
            writes.append(target)
        return Call(func, Kind.EXTERN, None, tuple(dict.fromkeys(reads)), tuple(dict.fromkeys(writes)))
    if target is not None:
        if func.startswith("empty_strided"):
            buffers.allocate(target, value)
        buffers.bind(target, value)
    return None


def _partitions(tree: ast.Module) -> dict[int, ast.FunctionDef]:
    """The graph partitions ``call()`` runs, by index: the functions ``Runner(partitions=[...])`` lists."""
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "Runner":
            for kw in node.keywords:
                if kw.arg == "partitions" and isinstance(kw.value, (ast.List, ast.Tuple)):
                    elts = kw.value.elts
                    return {i: defs[e.id] for i, e in enumerate(elts) if isinstance(e, ast.Name) and e.id in defs}
    return {}


def _partition(stmt: ast.stmt) -> int | None:
    """The index of the partition a statement of ``call()`` runs (``self.partitions[0](args)``), or None."""
    value = stmt.value if isinstance(stmt, (ast.Assign, ast.Expr)) else None
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Subscript)):
        return None
    index = value.func.slice
    if ast.unparse(value.func.value) != "self.partitions" or not isinstance(index, ast.Constant):
        return None
    return index.value if isinstance(index.value, int) and not isinstance(index.value, bool) else None


def _statements(fn: ast.FunctionDef, partitions: dict[int, ast.FunctionDef]) -> Iterator[tuple[ast.stmt, bool]]:
    """The statements ``call()`` runs, each partition's in its place: (statement, whether ``call()``'s own)."""
    for stmt in _body(fn.body):
        index = _partition(stmt)
        if index is not None and index in partitions:
            yield from ((s, False) for s in _body(partitions[index].body))
        else:
            yield stmt, True


def parse_wrapper(code: str, where: str) -> Wrapper:
    """The calls of a wrapper's ``call()`` (``code``: the artifact's payload; ``where``: its place), in order.

    Raises:
        LedgerError: the code is not Python, or has no ``call()``.
    """
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError) as exc:
        at = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
        raise LedgerError(f"{where}: the output code is not Python{at}: {exc}") from None
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "call"), None)
    if fn is None:
        raise LedgerError(f"{where}: the output code has no call(): not a wrapper Inductor wrote")
    signatures = _signatures(tree)
    lines = code.splitlines()
    buffers = _Buffers()
    calls: list[Call] = []
    returns: tuple[str, ...] = ()
    for stmt, own in _statements(fn, _partitions(tree)):
        if isinstance(stmt, ast.Return):
            if not own or stmt.value is None:
                continue
            items = stmt.value.elts if isinstance(stmt.value, ast.Tuple) else [stmt.value]
            returns = tuple(dict.fromkeys(b for e in items if (b := buffers.of(e)) is not None))
            continue
        call = _call(stmt, buffers, signatures)
        if call is not None:
            handle, sources = _comments(lines, stmt.lineno)
            calls.append(replace(call, handle=handle, sources=sources))
    return Wrapper(tuple(calls), returns, buffers.sizes)
