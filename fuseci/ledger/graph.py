"""Inductor's post-grad FX graph, read with :mod:`ast` (never run) from the text it logs
(``inductor_post_grad_graph``): each node's name, ATen target, the nodes it takes, its element
type and shape, and the model source line its ``# File:`` comment gives it."""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

from fuseci.errors import LedgerError

#: Bytes per element of the element types Inductor prints (``bf16[...]``).
ITEMSIZE: dict[str, int] = {
    "f64": 8, "f32": 4, "f16": 2, "bf16": 2, "tf32": 4,
    "f8e4m3fn": 1, "f8e5m2": 1, "f8e4m3fnuz": 1, "f8e5m2fnuz": 1, "f8e8m0fnu": 1,
    "c128": 16, "c64": 8, "c32": 4,
    "i64": 8, "i32": 4, "i16": 2, "i8": 1, "u64": 8, "u32": 4, "u16": 2, "u8": 1, "b8": 1,
}  # fmt: skip

#: PyTorch's dtype names (``torch.bfloat16``) as the graph prints them.
TORCH_DTYPES: dict[str, str] = {
    "float64": "f64", "double": "f64", "float32": "f32", "float": "f32", "float16": "f16", "half": "f16",
    "bfloat16": "bf16", "float8_e4m3fn": "f8e4m3fn", "float8_e5m2": "f8e5m2", "complex64": "c64",
    "complex128": "c128", "int64": "i64", "long": "i64", "int32": "i32", "int": "i32", "int16": "i16",
    "int8": "i8", "uint8": "u8", "bool": "b8",
}  # fmt: skip

#: ATen ops (by name, any overload) that return a view or alias of their first argument.
VIEW_OPS = frozenset(
    {
        "view", "reshape", "_unsafe_view", "_reshape_alias", "permute", "select", "transpose", "t",
        "expand", "expand_as", "slice", "squeeze", "unsqueeze", "alias", "as_strided", "diagonal",
        "narrow", "view_as", "detach", "unfold", "view_as_real", "view_as_complex",
    }
)  # fmt: skip

_TYPE = re.compile(r"^(\w+)\[([^\]]*)\](?:\[([^\]]*)\])?")
_FILE = re.compile(r"#\s*File:\s*(?P<file>.+?):(?P<line>\d+) in [^,]*, code: (?P<code>.*)$")


@dataclass(frozen=True, slots=True)
class TensorType:
    """A node's element type and shape as the graph prints them."""

    dtype: str
    """Inductor's short name (``bf16``)."""
    shape: tuple[int, ...] | None
    """None when a size is symbolic (``s0``): dynamic shapes."""
    strides: tuple[int, ...] | None = None

    @property
    def nbytes(self) -> int | None:
        """Elements times element size, or None when either is unknown."""
        size = ITEMSIZE.get(self.dtype)
        if size is None or self.shape is None:
            return None
        return math.prod(self.shape) * size


@dataclass(frozen=True, slots=True)
class GraphNode:
    """One node of the post-grad graph."""

    name: str
    target: str
    """The op without ``torch.ops.`` (``aten.add.Tensor``), ``getitem`` for ``x[0]``,
    ``placeholder`` for a graph input."""
    args: tuple[str, ...]
    """The nodes it takes, in order, each once."""
    type: TensorType | None
    """None for a tuple (``var_mean``), a symbol, or a node printed without a type."""
    line: str = ""
    """The model source line (``models32.py:25: x = x + ...``), or ""."""
    symbol: bool = False
    """A symbolic size (``Sym(s0)``), not a tensor: moves no bytes."""

    @property
    def is_view(self) -> bool:
        """Whether it shares its first argument's storage (moves no bytes)."""
        parts = self.target.split(".")
        return len(parts) >= 2 and parts[0] in ("aten", "prims") and parts[1] in VIEW_OPS


@dataclass(frozen=True, slots=True)
class PostGradGraph:
    """A post-grad graph: nodes in order, its inputs and outputs."""

    nodes: dict[str, GraphNode]
    placeholders: tuple[str, ...]
    outputs: tuple[str, ...]
    """The returned nodes, as written (not resolved)."""

    def base(self, name: str) -> str:
        """The node whose storage ``name`` shares: followed through view and alias ops."""
        seen = 0
        node = self.nodes.get(name)
        while node is not None and node.is_view and node.args and seen < len(self.nodes):
            name, node, seen = node.args[0], self.nodes.get(node.args[0]), seen + 1
        return name

    def nbytes(self, name: str) -> int | None:
        """The bytes of a node's tensor; 0 for a symbol, None when unknown."""
        node = self.nodes.get(name)
        if node is not None and node.symbol:
            return 0
        return None if node is None or node.type is None else node.type.nbytes


def source_line(file: str, line: int | str, code: str) -> str:
    """A model source line as the ledger writes it: ``file:line: code``, the file by its base name
    (a ledger recorded in CI then matches one recorded elsewhere)."""
    return f"{PurePosixPath(file.strip()).name}:{line}: {code.strip()}"


def tensor_type(text: str, sizes: Mapping[str, int] | None = None) -> TensorType | None:
    """``bf16[8, 1024][1024, 1]cuda:0`` as a :class:`TensorType`; None when it is not one. A symbolic size
    (``bf16[s27, 1024]``, ``s27*s77``) is valued from ``sizes`` (as the harness recorded them); unknown without."""
    m = _TYPE.match(text.strip())
    if m is None:
        return None
    strides = _ints(m.group(3), sizes) if m.group(3) is not None else None
    return TensorType(m.group(1), _ints(m.group(2), sizes), strides)


def _ints(text: str, sizes: Mapping[str, int] | None = None) -> tuple[int, ...] | None:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    values = [_size(p, sizes or {}) for p in parts]
    return None if any(x is None for x in values) else tuple(x for x in values if x is not None)


_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv}


def _size(text: str, sizes: Mapping[str, int]) -> int | None:
    """A printed size: an integer, or sums and products of symbols and integers (``s27*s77``, ``2*s0 + 1``) valued
    from ``sizes``; None for anything else (``Max(...)``, a symbol with no value)."""
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        tree = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None
    return _value(tree, sizes, 0)


def _value(node: ast.expr, sizes: Mapping[str, int], depth: int) -> int | None:
    if depth > 50:
        return None
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return sizes.get(node.id)
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _value(node.left, sizes, depth + 1), _value(node.right, sizes, depth + 1)
        if left is None or right is None or (isinstance(node.op, ast.FloorDiv) and right == 0):
            return None
        return _ARITHMETIC[type(node.op)](left, right)
    return None


def _target(value: ast.expr) -> str:
    if isinstance(value, ast.Subscript):
        return "getitem"
    if isinstance(value, ast.Call):
        return ast.unparse(value.func).removeprefix("torch.ops.")
    return ast.unparse(value)[:80]


def _lines(text: str) -> dict[int, str]:
    """The model source line of each line of the text: the ``# File:`` comment above it, until a
    blank line ends its group."""
    out: dict[int, str] = {}
    current = ""
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not stripped:
            current = ""
        elif stripped.startswith("#"):
            if m := _FILE.search(stripped):
                current = source_line(m["file"], m["line"], m["code"])
        else:
            out[number] = current
    return out


def _forward(text: str, where: str) -> ast.FunctionDef:
    # The class is printed as ``class <lambda>(...)``: not a Python name.
    fixed = re.sub(r"^class <\w+>", "class G", text, count=1, flags=re.M)
    try:
        tree = ast.parse(fixed)
    except (SyntaxError, ValueError) as exc:
        at = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
        raise LedgerError(f"{where}: the post-grad graph is not the Python Inductor prints{at}: {exc}") from None
    classes = (c for c in tree.body if isinstance(c, ast.ClassDef))
    forward = next((f for c in classes for f in c.body if isinstance(f, ast.FunctionDef) and f.name == "forward"), None)
    if forward is not None:
        return forward
    raise LedgerError(f"{where}: the post-grad graph has no forward(): not a graph Inductor printed")


def parse_graph(text: str, where: str, sizes: Mapping[str, int] | None = None) -> PostGradGraph:
    """Read a post-grad graph's ``text`` (from ``where``: ``case.json: graph 0/0``), ``sizes`` valuing its symbols.

    Raises:
        LedgerError: the text is not Python, or holds no ``forward``.
    """
    forward = _forward(text, where)
    lines = _lines(text)
    nodes: dict[str, GraphNode] = {}
    for arg in forward.args.args[1:]:
        note = arg.annotation.value if isinstance(arg.annotation, ast.Constant) else ""
        note = note if isinstance(note, str) else ""
        nodes[arg.arg] = GraphNode(arg.arg, "placeholder", (), tensor_type(note, sizes), symbol=note.startswith("Sym("))
    outputs: tuple[str, ...] = ()
    for stmt in forward.body:
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            outputs = tuple(n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name) and n.id in nodes)
            continue
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            name, value = stmt.target.id, stmt.value
            note = stmt.annotation.value if isinstance(stmt.annotation, ast.Constant) else ""
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name, value, note = stmt.targets[0].id, stmt.value, ""
        else:
            continue
        if isinstance(value, ast.Constant):  # ``x = None``: the graph freeing a node, not a node
            continue
        note = note if isinstance(note, str) else ""
        args = tuple(dict.fromkeys(n.id for n in ast.walk(value) if isinstance(n, ast.Name) and n.id in nodes))
        nodes[name] = GraphNode(
            name, _target(value), args, tensor_type(note, sizes), lines.get(stmt.lineno, ""), note.startswith("Sym(")
        )
    return PostGradGraph(nodes, tuple(n for n, node in nodes.items() if node.target == "placeholder"), outputs)
