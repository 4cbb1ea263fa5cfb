"""How fuseci's messages write a document's values (:func:`shown`), places (:func:`json_path`)
and pydantic's errors (:func:`convert`, for :func:`fuseci.validation.problems`)."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Union

from pydantic import BaseModel
from pydantic_core import ErrorDetails

Loc = tuple[str | int, ...]
"""A place in a document: the keys and indices that lead to it from the top."""

#: What a value refused for its type was expected to be, by pydantic's error type.
TYPE_WORDS = {
    **dict.fromkeys(("int_type", "int_parsing", "int_from_float"), "an integer"),
    **dict.fromkeys(("float_type", "float_parsing"), "a number"),
    **dict.fromkeys(("bool_type", "bool_parsing"), "true or false"),
    "string_type": "a string",
    **dict.fromkeys(("dict_type", "model_type", "model_attributes_type", "dataclass_type"), "an object"),
    **dict.fromkeys(("list_type", "tuple_type", "set_type"), "a list"),
    "none_required": "null",
}

#: What :class:`fuseci.validation.Expect` rewords: refusals of a value's type or form.
TYPE_ERRORS = frozenset({*TYPE_WORDS, "finite_number", "string_pattern_mismatch", "expected", "literal_error"})

#: The message of every other error type: ``{got}`` is the value as ``show`` writes it, ``{input}``
#: the value itself, the other fields pydantic's context (limits as ``%g``).
_TEMPLATES = {
    "expected": "expected {what}, got {got}",
    "invalid_key": "expected a string key, got {got}",
    "finite_number": "expected a finite number, got {input}",
    "missing": "missing required key {key}",
    "string_too_long": "a string of {length} characters, more than the {max_length} allowed",
    "string_too_short": "a string shorter than {min_length} characters",
    "string_pattern_mismatch": "expected a string matching {pattern}, got {got}",
    "too_long": "{size}, more than the {max_length} allowed",
    "too_short": "{size}, fewer than the {min_length} required",
    "greater_than_equal": "{input} is below the smallest value allowed, {ge}",
    "greater_than": "must be more than {gt}, got {input}",
    "positive": "must be positive, got {input}",
    "less_than": "{input} is too large: the limit is below {lt}",
    "less_than_equal": "{input} is above the largest value allowed, {le}",
}


#: The JSON type of a value, as messages name it (the first that fits: a boolean is no number).
_KINDS: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (bool, "a boolean"),
    ((int, float), "a number"),
    (str, "a string"),
    ((list, tuple), "a list"),
    (dict, "an object"),
)


def shown(value: Any) -> str:
    """A value in a message: its JSON type and a short rendering (``a string "x"``, ``a list of 3``)."""
    if value is None:
        return "null"
    kind = next((word for of, word in _KINDS if isinstance(value, of)), type(value).__name__)
    if isinstance(value, (dict, list, tuple)):
        return f"{kind} of {len(value)}"
    try:
        text = json.dumps(value[:61] if isinstance(value, str) else value, allow_nan=True)
    except (TypeError, ValueError):
        text = repr(value)[:61]
    return f"{kind} {text[:60]}{'...' if len(text) > 60 else ''}"


_KEY = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")


def json_path(loc: Sequence[str | int]) -> str:
    """A location as messages write it: ``a.b``, ``a[0]``, ``a["x.y"]``; a key over 60 characters is cut short."""
    out = ""
    for key in loc:
        if isinstance(key, int):
            out += f"[{key}]"
        elif len(key) > 60:
            out += f"[{json.dumps(key[:60])}...]"
        elif not out and _KEY.match(key):
            out = key
        else:
            out += _member(key)
    return out


@functools.lru_cache(maxsize=4096)
def _member(key: str) -> str:
    """``.b`` or ``["dram__bytes.sum"]``: the step of a key of at most 60 characters (cached: keys repeat a lot)."""
    return f".{key}" if _KEY.match(key) else f"[{json.dumps(key)}]"


def did_you_mean(value: object, options: Sequence[str]) -> str:
    """``did you mean 'x'? `` when ``value`` is close to one of ``options``, else ``""``."""
    if not isinstance(value, str) or len(value) > 100:
        return ""
    close = difflib.get_close_matches(value, list(options), n=1)
    return f"did you mean {close[0]!r}? " if close else ""


def key_repr(key: object) -> str:
    """A key in a message, its repr cut at 62 characters."""
    text = repr(key)
    return text if len(text) <= 62 else text[:59] + "..."


def message(error: ErrorDetails, show: Callable[[Any], str], mapping: str) -> str:
    """One pydantic error in fuseci's words; ``mapping`` is what an object is called."""
    kind, value, ctx = error["type"], error.get("input"), error.get("ctx") or {}
    if kind in TYPE_WORDS:
        word = TYPE_WORDS[kind]
        return f"expected {mapping if word == 'an object' else word}, got {show(value)}"
    if kind in ("choice", "literal_error", "enum"):
        return _not_a_choice(kind, value, ctx, show)
    if kind in ("value_error", "assertion_error") and "error" in ctx:
        return str(ctx["error"])
    if kind == "string_too_short" and not value:
        return "an empty string"
    kind = "positive" if kind == "greater_than" and ctx["gt"] == 0 else kind
    if kind not in _TEMPLATES:
        return str(error.get("msg", kind))
    fields = {k: f"{v:g}" if isinstance(v, float) else v for k, v in ctx.items()}
    if kind in ("too_long", "too_short"):
        size = ctx.get("actual_length") or (len(value) if isinstance(value, (list, tuple, dict)) else "?")
        fields["size"] = f"{mapping} of {size} entries" if isinstance(value, dict) else f"a list of {size}"
    if kind == "string_too_long":
        fields["length"] = len(str(value))
    if kind == "missing":
        fields["key"] = key_repr(error["loc"][-1])
    if "{got}" in _TEMPLATES[kind]:
        fields["got"] = show(value)
    return _TEMPLATES[kind].format_map({**fields, "input": value})


def _not_a_choice(kind: str, value: Any, ctx: Mapping[str, Any], show: Callable[[Any], str]) -> str:
    """A value outside an enumeration, with the closest choice."""
    if kind == "choice":
        choices, listed = ctx["choices"], ", ".join(map(repr, ctx["choices"]))
    else:
        listed = str(ctx.get("expected", ""))
        choices = re.findall(r"'((?:[^'\\]|\\.)*)'", listed)
    hint = did_you_mean(value, choices)
    if kind == "choice" and ctx.get("what"):
        return f"{ctx['what']} {key_repr(value)}; {hint}choose one of {', '.join(choices)}"
    return f"{show(value)} is not one of {listed}{'; ' + hint.strip() if hint else ''}"


@dataclass
class _Raw:
    """A pydantic error on its way to a problem: its steps, each a union branch's label (True) or a document key."""

    steps: list[tuple[str | int, bool]]
    error: ErrorDetails
    message: str
    on_key: bool = False

    def loc(self) -> Loc:
        return tuple(s for s, label in self.steps if not label)


def convert(
    errors: Sequence[ErrorDetails], data: Any, model: Any, show: Callable[[Any], str], mapping: str
) -> list[tuple[Loc, str, str, str | int | None, bool]]:
    """pydantic's ``errors`` for ``data`` as (place, message, type, key, on_key): a missing key at the object lacking
    it; an unknown key at itself, naming the allowed keys; of a union, only the branch the value came closest to."""
    raws = [_raw(error, data, show, mapping) for error in errors]
    while any(label for raw in raws for _, label in raw.steps):
        raws = _reduce_unions(raws)
    out: list[tuple[Loc, str, str, str | int | None, bool]] = []
    for raw in raws:
        loc, kind, key, text = raw.loc(), raw.error["type"], None, raw.message
        kind = "extra_forbidden" if kind == "unexpected_keyword_argument" else kind  # a Document's unknown key
        if raw.on_key and loc:
            key = loc[-1]
        elif kind == "missing" and loc:
            loc, key = loc[:-1], loc[-1]
        elif kind == "extra_forbidden" and loc:
            key, allowed = loc[-1], _allowed_keys(model, loc[:-1])
            text = f"unknown key {key_repr(key)}; {did_you_mean(key, allowed)}allowed keys: {', '.join(allowed)}"
        out.append((loc, text, kind, key, raw.on_key))
    return out


def _raw(error: ErrorDetails, data: Any, show: Callable[[Any], str], mapping: str) -> _Raw:
    """Mark each step of ``error``'s location as a key of ``data`` or a union branch's label."""
    steps: list[tuple[str | int, bool]] = []
    node, loc, of_key = data, error["loc"], False
    for i, step in enumerate(loc):
        if step == "[key]" and steps and not steps[-1][1]:
            of_key = True  # pydantic's mark of a map's key (the step before) that is wrong
            continue
        held = isinstance(node, dict) and step in node
        held = held or (isinstance(node, (list, tuple)) and isinstance(step, int) and -len(node) <= step < len(node))
        if held:
            node = node[step]
        steps.append((step, not held and not (error["type"] == "missing" and i == len(loc) - 1)))
    text = message(error, show, mapping)
    if of_key and text.startswith(("expected ", "a string of ")):
        text = f"not a valid key: {text}"
    return _Raw(steps, error, text, of_key)


def _reduce_unions(raws: list[_Raw]) -> list[_Raw]:
    """Resolve each error's outermost union: keep the closest branch's errors, or merge type refusals into one."""
    order: list[tuple[Any, ...] | _Raw] = []
    groups: dict[tuple[Any, ...], dict[Any, list[_Raw]]] = {}  # union point -> branch label -> errors
    for raw in raws:
        first = next((i for i, (_, label) in enumerate(raw.steps) if label), None)
        if first is None:
            order.append(raw)
            continue
        point = tuple(raw.steps[:first])
        if point not in groups:
            groups[point] = {}
            order.append(point)
        rest = dataclasses.replace(raw, steps=raw.steps[:first] + raw.steps[first + 1 :])
        groups[point].setdefault(raw.steps[first][0], []).append(rest)
    return [r for item in order for r in ([item] if isinstance(item, _Raw) else _closest(item, groups[item]))]


def _closest(point: tuple[Any, ...], groups: dict[Any, list[_Raw]]) -> list[_Raw]:
    """The errors of the branch a value got furthest into (deepest, then fewest), else one ``expected a or b, ...``."""
    branches, depth = list(groups.values()), len([s for s in point if not s[1]])
    closer = [b for b in branches if not all(_refused_type(r, depth) for r in b)]
    if closer:
        return max(closer, key=lambda b: (max(len(r.loc()) for r in b), -len(b)))
    wanted = list(dict.fromkeys(r.message[len("expected ") : r.message.index(", got ")] for b in branches for r in b))
    either = wanted[0] if len(wanted) == 1 else f"{', '.join(wanted[:-1])} or {wanted[-1]}"
    got = branches[0][0].message.split(", got ", 1)[1]
    error = ErrorDetails(type="union_type", loc=(), msg="", input=branches[0][0].error.get("input"))
    return [_Raw(list(point), error, f"expected {either}, got {got}")]


def _refused_type(r: _Raw, depth: int) -> bool:
    """Whether a union branch's error refuses the value for its type alone (``expected a list``)."""
    return len(r.loc()) == depth and r.message.startswith("expected ") and ", got " in r.message


def _allowed_keys(model: Any, loc: Loc) -> tuple[str, ...]:
    """The keys the model at ``loc`` under ``model`` takes (its fields' aliases), or ``()``."""
    candidates = _expand(model)
    for step in loc:
        candidates = [t for tp in candidates for t in _expand(_child(tp, step))]
    for tp in candidates:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return tuple(f.alias or name for name, f in tp.model_fields.items())
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            return tuple(f.name for f in dataclasses.fields(tp))
    return ()


def _expand(tp: Any) -> list[Any]:
    """The types a value of ``tp`` may be: ``Annotated`` unwrapped, unions opened."""
    if tp is None:
        return []
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _expand(typing.get_args(tp)[0])
    if origin is Union or origin is types.UnionType:
        return [t for arg in typing.get_args(tp) for t in _expand(arg)]
    return [tp]


def _child(tp: Any, step: str | int) -> Any:
    """The type of the value at ``step`` in a value of ``tp`` (None when it has none)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return next((f.annotation for name, f in tp.model_fields.items() if step in (name, f.alias)), None)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return typing.get_type_hints(tp, include_extras=True).get(step) if isinstance(step, str) else None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (dict, Mapping) and len(args) == 2:
        return args[1]
    if origin in (list, Sequence, set, frozenset) and args and isinstance(step, int):
        return args[0]
    if origin is tuple and args and isinstance(step, int):
        return args[0] if len(args) == 2 and args[1] is Ellipsis else args[step] if step < len(args) else None
    return None
