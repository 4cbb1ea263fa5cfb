"""The field validators of suite files: each checks one value and, when it is wrong, raises a
one-line :class:`~fuseci.errors.SuiteError` naming the file, the line and the field path."""

from __future__ import annotations

import difflib
import math
import re
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from fuseci.config import names
from fuseci.config.policy import brief_repr
from fuseci.config.yaml_loader import kind as _kind
from fuseci.errors import SuiteError

#: Most dimensions of an input tensor.
MAX_DIMS = 32
#: Most elements of an input tensor: more than any GPU holds.
_MAX_ELEMENTS = 2**34


_SIMPLE_KEY = re.compile(r"\A[A-Za-z0-9_.\-]{1,80}\Z")

#: What each required key looks like, for "missing required key" messages.
_EXAMPLES = {
    "suite": "suite: mylib",
    "cases": "cases: [{id: ..., inputs: ..., variants: ...}]",
    "id": "id: my_case",
    "inputs": "inputs: {x: {shape: [67108864]}}",
    "variants": "variants: {unfused: mylib.ops:f_unfused, fused: mylib.fused:f}",
    "shape": "shape: [67108864]",
    "fn": "fn: mylib.fused:f",
}


def sub(where: str, key: object) -> str:
    """The field path of ``key`` under ``where``: ``a.b`` for plain keys, ``a[...]`` otherwise."""
    if isinstance(key, str) and _SIMPLE_KEY.match(key):
        return f"{where}.{key}"
    return f"{where}[{brief_repr(key)}]"


def did_you_mean(value: object, options: tuple[str, ...]) -> str:
    if not isinstance(value, str) or len(value) > 100:
        return ""
    close = difflib.get_close_matches(value, options, n=1)
    return f"did you mean {close[0]!r}? " if close else ""


_P = ParamSpec("_P")
_T = TypeVar("_T")
_F = TypeVar("_F")


class Where:
    """Builds messages that name the file, the line and the field path, and keeps the problems
    found on the way (:meth:`attempt`), so that one pass over a file finds all of them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problems: list[SuiteError] = []
        """Every problem found so far, in the order the file was read."""

    def attempt(self, fallback: _F, parse: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T | _F:
        """``parse(*args, **kwargs)``; when it finds a problem, the problem is kept and
        ``fallback`` returned, so that the fields after it are checked too."""
        try:
            return parse(*args, **kwargs)
        except SuiteError as exc:
            self.problems.append(exc.with_traceback(None))  # kept for its message: not its frames
            return fallback

    def error(self, where: str, message: str, node: object = None, key: object = None) -> SuiteError:
        """The error at the line of ``key`` in the mapping ``node`` (by default the last field of
        ``where``, when ``node`` holds it), else at the line the mapping starts on."""
        line = _line(node, where, key)
        at = f"{self.path}:{line}" if line else str(self.path)
        return SuiteError(f"{at}: {where}: {message}", path=self.path, line=line)


def _line(node: object, where: str, key: object) -> int:
    line_of = getattr(node, "line_of", None)
    if line_of is None:
        return int(getattr(node, "line", 0) or 0)
    if key is None:
        last = where.rsplit(".", 1)[-1] if "." in where else where
        key = last if isinstance(node, dict) and last in node else None
    return int(line_of(key) if key is not None else getattr(node, "line", 0) or 0)


def check_keys(
    w: Where, where: str, node: Mapping[str, Any], allowed: tuple[str, ...], required: tuple[str, ...] = ()
) -> None:
    """Every unknown key is kept as a problem (the known ones can still be checked); a missing
    required key is raised (what needs it cannot be checked)."""
    for key in node:
        if key not in allowed:
            hint = did_you_mean(key, allowed)
            w.problems.append(
                w.error(
                    where, f"unknown key {brief_repr(key)}; {hint}allowed keys: {', '.join(allowed)}", node, key=key
                )
            )
    for key in required:
        if key not in node:
            example = f" (e.g. {_EXAMPLES[key]})" if key in _EXAMPLES else ""
            raise w.error(where, f"missing required key {key!r}{example}", node)


def mapping(w: Where, where: str, value: object, parent: object = None) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise w.error(where, f"expected a mapping, got {_kind(value)} {brief_repr(value)}", parent)
    return value


def optional_mapping(w: Where, where: str, value: object, parent: object) -> Mapping[str, Any]:
    """A mapping that may be left empty (``key:`` alone is YAML's null)."""
    return {} if value is None else mapping(w, where, value, parent)


def text(w: Where, where: str, value: object, node: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        quote = "; quote it" if isinstance(value, (int, float)) else ""
        raise w.error(where, f"expected a string, got {_kind(value)} {brief_repr(value)}{quote}", node)
    return value


def choice(w: Where, where: str, value: object, choices: tuple[str, ...], node: object, what: str) -> str:
    if isinstance(value, str) and value in choices:
        return value
    raise w.error(
        where,
        f"{what} {brief_repr(value)}; {did_you_mean(value, choices)}choose one of {', '.join(choices)}",
        node,
    )


def check_id(w: Where, where: str, value: object, node: object) -> str:
    if isinstance(value, str) and len(value) > names.MAX_ID_CHARS and names.ID_PATTERN.fullmatch(value):
        raise w.error(
            where,
            f"{brief_repr(value)} is {len(value)} characters long; an id has at most {names.MAX_ID_CHARS} "
            "(it names files and NVTX ranges): shorten it",
            node,
        )
    if not names.is_id(value):
        raise w.error(
            where,
            f"{brief_repr(value)} is not a valid id: use letters, digits, '_' and '-' only "
            "(ncu's NVTX filter treats '/' and ':' specially)",
            node,
        )
    return value


def unique_ids(w: Where, kind: str, ids: list[tuple[str, str, int]]) -> None:
    """Keep a problem for every id that repeats an earlier one, letter case ignored
    (:func:`~fuseci.config.names.id_key`).

    Args:
        w: Where the problems are kept.
        kind: What the ids name (``case``, ``variant``), for the message.
        ids: Each id with its field path and its line, in file order.
    """
    first: dict[str, tuple[str, int]] = {}
    for value, where, line in ids:
        key = names.id_key(value)
        if key not in first:
            first[key] = (value, line)
            continue
        other, other_line = first[key]
        at = f"{w.path}:{line}" if line else str(w.path)
        if other == value:
            why = f"duplicate {kind} id (first defined on line {other_line}); rename one"
        else:
            why = (
                f"{kind} id {value!r} differs from {other!r} (line {other_line}) only in letter case; ids are "
                f"compared ignoring case, as macOS and Windows compare file names: rename one"
            )
        w.problems.append(SuiteError(f"{at}: {where}: {why}", path=w.path, line=line))


def check_ref(w: Where, where: str, value: object, node: object) -> str:
    if (
        not isinstance(value, str)
        or value.count(":") != 1
        or not all(part and all(p.isidentifier() for p in part.split(".")) for part in value.split(":"))
    ):
        raise w.error(
            where,
            f"{brief_repr(value)} is not a 'module:function' reference (e.g. 'kernels.elementwise:fused')",
            node,
        )
    return value


def number(w: Where, where: str, value: object, node: object, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise w.error(where, f"expected a finite number, got {_kind(value)} {brief_repr(value)}", node)
    if positive and value <= 0:
        raise w.error(where, f"must be positive, got {brief_repr(value)}", node)
    return float(value)


def seed(w: Where, where: str, value: object, node: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise w.error(where, f"expected a non-negative integer, got {_kind(value)} {brief_repr(value)}", node)
    return value


def seed_for(base: int, case_id: str, name: str) -> int:
    """A stable per-tensor seed, so that inputs of one case differ but never change run to run."""
    return (base * 1_000_003 + zlib.crc32(f"{case_id}/{name}".encode())) % 2**63


def _shape_hint(raw: object) -> str:
    """The fix for a shape written as text: YAML has no tuples, so ``(8192, 8192)`` is a string
    (and inside ``{...}`` its comma even splits it into two keys)."""
    if not isinstance(raw, str) or not re.fullmatch(r"[\s(\[]*[0-9][0-9\s,]*[)\]]?\s*", raw):
        return ""
    dims = re.findall(r"[0-9]+", raw)
    whole = raw.strip().startswith(("(", "[")) == raw.strip().endswith((")", "]"))  # not cut by a {...} comma
    example = ", ".join(dims) if whole and len(dims) <= MAX_DIMS else "8192, 8192"
    return f"; YAML has no tuples: write the shape as a list in brackets, e.g. shape: [{example}]"


def shape(w: Where, where: str, raw: object, node: object) -> tuple[int, ...]:
    dims = [raw] if isinstance(raw, int) and not isinstance(raw, bool) else raw
    if (
        not isinstance(dims, list)
        or not dims
        or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims)
    ):
        raise w.error(
            where,
            f"expected a list of positive integers (or one), got {_kind(raw)} {brief_repr(raw)}{_shape_hint(raw)}",
            node,
        )
    if len(dims) > MAX_DIMS:
        raise w.error(where, f"{len(dims)} dimensions; a tensor has at most {MAX_DIMS}", node)
    elements = 1
    for d in dims:
        elements *= d
        if elements > _MAX_ELEMENTS:
            raise w.error(
                where,
                f"{brief_repr(raw)} has more than {_MAX_ELEMENTS} elements (2**34), more than any GPU holds",
                node,
            )
    return tuple(dims)


def flag(w: Where, where: str, value: object, node: object) -> bool:
    if not isinstance(value, bool):
        raise w.error(where, f"expected true or false, got {_kind(value)} {brief_repr(value)}", node)
    return value
