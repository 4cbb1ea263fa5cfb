"""The typed models of fuseci's documents, validated by pydantic, with errors in fuseci's words.

Every format fuseci reads (a suite, a baseline, a harness record, a results file, a run file) is
declared once as a tree of :class:`Model` classes (or :class:`Document` dataclasses, where code
builds the value too) built from the annotated types below; pydantic checks a parsed document
against it, reporting every problem at once with its location, and :func:`problems` turns
pydantic's errors into fuseci's one-line wording (``expected an integer, got a string "x"``,
``missing required key 'suite'``, ``unknown key 'shpe'; did you mean 'shape'? allowed keys:
...``), so that each reader adds only the file's name (and, for a suite, the line) and the fix.
:func:`json_path` writes a location as messages show it (``cases.bias_gelu.timings[0].median_ns``,
``values["dram__bytes.sum"]``).

Models are frozen, refuse unknown keys and are strict: ``true`` is not an integer, ``"1"`` is
not a number (integers are taken where a number is expected) and numbers are finite unless a
field is declared :data:`Number`. Containers of a document are lists; a model field typed
:data:`Items` takes a list and holds a tuple. Enumerations are written with :class:`Choice`.

A field's own rule that no type states is a pydantic validator raising ``ValueError("...")``:
its text is passed through as the problem. Depth and sizes of a whole document are bounded while
it is parsed (:mod:`fuseci.store.versioned`, :mod:`fuseci.config.yaml_loader`); each list, map
and string is bounded here by its type.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import functools
import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, NamedTuple, TypeVar, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    Strict,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic_core import PydanticCustomError, core_schema

from fuseci.config import names

#: Integers a document may hold: counts, sizes and indices fit in 63 bits.
INT_LIMIT = 2**63

Loc = tuple[str | int, ...]
"""A place in a document: the keys and indices that lead to it from the top."""


class Model(BaseModel):
    """The base of every document model: frozen, strict, closed to unknown keys, finite numbers.

    Fields are named as the document names its keys (or given an ``alias`` where the key is not
    a Python name); an unknown key is a problem naming the allowed ones (:func:`problems`).
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", strict=True, allow_inf_nan=False, populate_by_name=False, regex_engine="rust-regex"
    )


class OpenModel(Model):
    """A :class:`Model` whose unknown keys are left out, not refused: an object that a newer
    file of the same version may give new optional members (absent means none)."""

    model_config = ConfigDict(extra="ignore")


class Document:
    """The base of a frozen dataclass that a document holds as it is (a harness record's timing):
    pydantic validates an object into the dataclass as :class:`Model` validates a model (strict,
    closed to unknown keys, finite numbers; the fields' annotations are the types above), while
    code still builds it as a plain dataclass, unchecked. A subclass may widen
    ``__pydantic_config__`` (``extra="ignore"``) and hold pydantic validators.

    Declare it ``@dataclass(frozen=True, slots=True) class Timing(Document): ...``; validate with
    :func:`validate`."""

    __slots__ = ()
    __pydantic_config__: ClassVar[ConfigDict] = Model.model_config

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        """The dataclass's schema, taking an object (pydantic's hook): a strict dataclass would
        take only an instance of itself; its fields stay strict."""
        schema = handler(source)
        if schema["type"] == "dataclass":
            typing.cast("dict[str, Any]", schema)["strict"] = False
        return schema


class OpenDocument(Document):
    """A :class:`Document` whose unknown keys are left out, as :class:`OpenModel`'s."""

    __slots__ = ()
    __pydantic_config__: ClassVar[ConfigDict] = OpenModel.model_config


@dataclass(frozen=True, slots=True)
class Expect:
    """Names what a value must be, in messages: ``Annotated[str, pattern..., Expect("an id")]``
    reports ``expected an id, got a string "a/b"`` where the value has the wrong type, is not
    finite or does not match the pattern (every union branch refused it so); a refusal of its
    size, its range or by a validator's own rule is reported as such."""

    what: str
    """The expected value, with its article (``an id (letters, digits, '_' and '-')``)."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        """The inner type's schema, its refusals reworded (pydantic's hook)."""
        what = self.what

        def check(value: Any, inner: ValidatorFunctionWrapHandler) -> Any:
            try:
                return inner(value)
            except ValidationError as exc:
                if not all(e["type"] in _TYPE_ERRORS for e in exc.errors()):
                    raise
                raise PydanticCustomError("expected", "expected {what}", {"what": what}) from None

        return core_schema.no_info_wrap_validator_function(check, handler(source))


@dataclass(frozen=True, slots=True)
class Choice:
    """One of a fixed set of strings (an enumeration): ``Annotated[str, Choice(("a", "b"))]``.
    The JSON Schema lists them; a value outside them is reported with the closest one.

    Enum members are written as their values (``Choice(tuple(v.value for v in Verdict))``):
    a strict model would take only the members themselves. Annotating an enum,
    ``Annotated[Verdict, Choice(...)]``, gives the member of the value (and takes a member)."""

    values: tuple[str, ...]
    """The strings allowed, in the order messages list them."""
    what: str = ""
    """When set, how a wrong value is named: ``unsupported dtype 'f32'; did you mean 'float32'?
    choose one of float64, ...`` (else ``a string "f32" is not one of 'float64', ...``)."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        """A literal schema whose refusal names the choices (pydantic's hook)."""
        values, what = self.values, self.what
        allowed = frozenset(values)
        members = source if isinstance(source, type) and issubclass(source, enum.Enum) else None

        def check(value: Any, inner: ValidatorFunctionWrapHandler) -> Any:
            if isinstance(value, str) and value in allowed:
                return value if members is None else members(value)
            if members is not None and isinstance(value, members):
                return value
            raise PydanticCustomError("choice", "not one of the choices", {"choices": values, "what": what})

        return core_schema.no_info_wrap_validator_function(check, core_schema.literal_schema(list(values)))


_T = TypeVar("_T")

Items = Annotated[tuple[_T, ...], Strict(False)]
"""A list of values of one type, held as a tuple (``Items[float]``); bound its length with
``Field(max_length=...)``. Only the container is lax (a list is taken for the tuple): its items
are as strict as any field."""

Id = Annotated[
    str,
    Field(max_length=names.MAX_ID_CHARS, pattern=names.ID_PATTERN.pattern),
    Expect("an id (letters, digits, '_' and '-')"),
]
"""A suite, case or variant id, as the suite loader takes them (:func:`fuseci.config.names.is_id`)."""
QuantityName = Annotated[str, Field(max_length=200, pattern=r"^[A-Za-z0-9_.]+$"), Expect("a quantity name")]
"""A quantity's name: an ncu metric, verbatim, or one of fuseci's (``launches``, ``event_time.iqr``)."""
Name = Annotated[str, Field(max_length=1 << 16)]
"""A kernel's name as ncu reports it (C++ templates make them long)."""
Text = Annotated[str, Field(max_length=1 << 20)]
"""A message, description or note."""
PathText = Annotated[str, Field(max_length=4096)]
"""A file's path, as written into a document."""
Key = Annotated[str, Field(max_length=200)]
"""A key of a map with free keys (an environment field's name)."""
Count = Annotated[int, Field(ge=0, lt=INT_LIMIT)]
"""A non-negative integer below 2**63."""
Integer = Annotated[int, Field(ge=-INT_LIMIT, lt=INT_LIMIT)]
"""An integer of 64 bits, signed."""
FiniteNumber = float
"""A finite number (an integer is taken too), of any sign: a model's floats are finite by default."""
Amount = Annotated[float, Field(ge=0)]
"""A finite, non-negative number (bytes, times, counts, percentages)."""
Number = Annotated[float, Field(allow_inf_nan=True)]
"""A number that may be infinite or NaN, where a format keeps them (the error of a NaN output)."""


def _as_written(value: Any, inner: ValidatorFunctionWrapHandler) -> Any:
    number = inner(value)
    return value if type(value) is int else number


AsWritten = WrapValidator(_as_written)
"""Keeps an integer an integer where a number is expected (``Annotated[Amount, AsWritten]``),
as the file wrote it, so that a document written again from what was read is the same, byte
for byte (``3``, not ``3.0``)."""
Scalar = Annotated[
    Union[Annotated[str, Field(max_length=4096)], bool, Integer, float, None],  # noqa: UP007 (an alias evaluated at run time)
    Expect("a string, a finite number, true, false or null"),
]
"""An environment value: a string, a finite number, a boolean or null."""
Env = Annotated[dict[Key, Scalar], Field(max_length=1000)]
"""An environment fingerprint and the facts beside it: at most 1000 fields."""


class Problem(NamedTuple):
    """One thing wrong with a document."""

    loc: Loc
    """Where: the keys and indices from the top (the object holding it, for a missing key)."""
    message: str
    """What is wrong and what was expected, one line in fuseci's wording."""
    type: str
    """pydantic's error type (``missing``, ``extra_forbidden``, ``int_type``, ``value_error``...)."""
    key: str | int | None = None
    """The key a ``missing`` or ``extra_forbidden`` problem is about, or the map's key that is
    wrong (:attr:`on_key`)."""
    on_key: bool = False
    """True when a map's key itself is wrong (the value under it may be right): :attr:`loc`
    ends with the key."""

    @property
    def where(self) -> str:
        """:attr:`loc` as a JSON path (see :func:`json_path`)."""
        return json_path(self.loc)


class Invalid(ValueError):
    """A document's values are not what its format allows; :attr:`problems` lists them all, and
    :attr:`where` and :attr:`problem` name the first."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        first = problems[0]
        super().__init__(f"{first.where}: {first.message}" if first.loc else first.message)
        self.problems = tuple(problems)
        """Every problem, in document order."""
        self.where = first.where
        """The JSON path of the first problem's value (empty for the whole document)."""
        self.problem = first.message
        """What is wrong with it, and what was expected."""


_M = TypeVar("_M")


def validate(model: type[_M], data: Any, at: Loc = (), show: Callable[[Any], str] | None = None) -> _M:
    """``data`` (a parsed document, or the part of one found at ``at``) as a ``model`` (a
    :class:`Model` or a :class:`Document` dataclass).

    Raises:
        Invalid: every value that does not fit, with its place (under ``at``) and the problem.
    """
    try:
        if isinstance(model, type) and issubclass(model, BaseModel):
            return model.model_validate(data)
        return _adapter(model).validate_python(data)
    except ValidationError as exc:
        found = problems(exc, data, model, show=show)
        raise Invalid([p._replace(loc=(*at, *p.loc)) for p in found]) from None


_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def _adapter(model: type[_M]) -> TypeAdapter[_M]:
    """pydantic's validator of a type that is not a model (built once: building it takes long)."""
    if model not in _ADAPTERS:
        _ADAPTERS[model] = TypeAdapter(model)
    return _ADAPTERS[model]


# --- messages ---------------------------------------------------------------------------------


def shown(value: Any) -> str:
    """A value in a message: its JSON type and a short, one-line rendering (``a string "x"``,
    ``a list of 3``)."""
    kind = (
        "null"
        if value is None
        else "a boolean"
        if isinstance(value, bool)
        else "a number"
        if isinstance(value, (int, float))
        else "a string"
        if isinstance(value, str)
        else "a list"
        if isinstance(value, (list, tuple))
        else "an object"
        if isinstance(value, dict)
        else type(value).__name__
    )
    if value is None:
        return kind
    if isinstance(value, (dict, list, tuple)):
        return f"{kind} of {len(value)}"
    try:
        text = json.dumps(value[:61] if isinstance(value, str) else value, allow_nan=True)
    except (TypeError, ValueError):
        text = repr(value)[:61]
    return f"{kind} {text[:60]}{'...' if len(text) > 60 else ''}"


_KEY = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")


def json_path(loc: Sequence[str | int]) -> str:
    """A location as messages write it: ``a.b``, ``a[0]``, ``a["dram__bytes.sum"]``; a key of
    more than 60 characters is cut (``a["xxx..."...]``)."""
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
    """``.b`` or ``["dram__bytes.sum"]``: the step of a key of at most 60 characters (the same
    few keys come back thousands of times a document; only short ones are kept)."""
    return f".{key}" if _KEY.match(key) else f"[{json.dumps(key)}]"


def _key_repr(key: object) -> str:
    text = repr(key)
    return text if len(text) <= 62 else text[:59] + "..."


def did_you_mean(value: object, options: Sequence[str]) -> str:
    """``did you mean 'x'? `` when ``value`` is close to one of ``options``, else ``""``."""
    if not isinstance(value, str) or len(value) > 100:
        return ""
    close = difflib.get_close_matches(value, list(options), n=1)
    return f"did you mean {close[0]!r}? " if close else ""


_TYPE_WORDS = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "dataclass_type": "an object",
    "list_type": "a list",
    "tuple_type": "a list",
    "set_type": "a list",
    "none_required": "null",
}

#: What :class:`Expect` rewords: refusals of a value's type or form.
_TYPE_ERRORS = frozenset({*_TYPE_WORDS, "finite_number", "string_pattern_mismatch", "expected", "literal_error"})


def _message(error: Mapping[str, Any], show: Callable[[Any], str], mapping: str) -> str:
    """One pydantic error in fuseci's words."""
    kind, value, ctx = error["type"], error.get("input"), error.get("ctx") or {}
    if kind in _TYPE_WORDS:
        word = _TYPE_WORDS[kind]
        return f"expected {mapping if word == 'an object' else word}, got {show(value)}"
    if kind == "expected":
        return f"expected {ctx['what']}, got {show(value)}"
    if kind == "invalid_key":
        return f"expected a string key, got {show(value)}"
    if kind == "finite_number":
        return f"expected a finite number, got {value}"
    if kind == "missing":
        return f"missing required key {_key_repr(error['loc'][-1])}"
    if kind == "choice":
        choices = ctx["choices"]
        hint = did_you_mean(value, choices)
        if ctx.get("what"):
            return f"{ctx['what']} {_key_repr(value)}; {hint}choose one of {', '.join(choices)}"
        return f"{show(value)} is not one of {', '.join(map(repr, choices))}{'; ' + hint.strip() if hint else ''}"
    if kind in ("literal_error", "enum"):
        options = re.findall(r"'((?:[^'\\]|\\.)*)'", str(ctx.get("expected", "")))
        hint = did_you_mean(value, options)
        return f"{show(value)} is not one of {ctx.get('expected', '')}{'; ' + hint.strip() if hint else ''}"
    if kind == "string_too_long":
        return f"a string of {len(str(value))} characters, more than the {ctx['max_length']} allowed"
    if kind == "string_too_short":
        return "an empty string" if not value else f"a string shorter than {ctx['min_length']} characters"
    if kind == "string_pattern_mismatch":
        return f"expected a string matching {ctx['pattern']}, got {show(value)}"
    if kind in ("too_long", "too_short"):
        size = ctx.get("actual_length") or (len(value) if isinstance(value, (list, tuple, dict)) else "?")
        what = f"{mapping} of {size} entries" if isinstance(value, dict) else f"a list of {size}"
        if kind == "too_long":
            return f"{what}, more than the {ctx['max_length']} allowed"
        return f"{what}, fewer than the {ctx['min_length']} required"
    if kind == "greater_than_equal":
        return f"{value} is below the smallest value allowed, {_bound(ctx['ge'])}"
    if kind == "greater_than":
        return (
            f"must be positive, got {value}"
            if ctx["gt"] == 0
            else f"must be more than {_bound(ctx['gt'])}, got {value}"
        )
    if kind == "less_than":
        return f"{value} is too large: the limit is below {_bound(ctx['lt'])}"
    if kind == "less_than_equal":
        return f"{value} is above the largest value allowed, {_bound(ctx['le'])}"
    if kind in ("value_error", "assertion_error") and "error" in ctx:
        return str(ctx["error"])
    return str(error.get("msg", kind))


def _bound(limit: Any) -> str:
    return f"{limit:g}" if isinstance(limit, float) else str(limit)


# --- from pydantic's errors to problems ------------------------------------------------------


@dataclass
class _Raw:
    """A pydantic error on its way to a problem: its steps, each marked as a union branch's
    label (pydantic names the branch it tried) or a key of the document."""

    steps: list[tuple[str | int, bool]]
    error: Mapping[str, Any]
    message: str
    on_key: bool = False

    def loc(self) -> Loc:
        return tuple(s for s, label in self.steps if not label)


def problems(
    exc: ValidationError,
    data: Any,
    model: Any = None,
    *,
    show: Callable[[Any], str] | None = None,
    mapping: str = "an object",
) -> list[Problem]:
    """pydantic's errors for ``data`` as fuseci's problems, in pydantic's order (each object's
    fields in the model's order, then its unknown keys).

    A missing key is placed at the object that lacks it; an unknown key at itself, naming the
    allowed keys of ``model`` there (the model ``data`` was validated as). Of a value that fits
    no branch of a union, only the branch it came closest to is reported (the one whose type it
    has), or one ``expected a or b, got ...`` when it has the type of none.

    Args:
        exc: What pydantic raised.
        data: The document it was validated from (union branches are told from keys by it).
        model: The model (or type) ``data`` was validated as, for the keys an unknown key could be.
        show: How a value is written (default :func:`shown`: ``a string "x"``).
        mapping: What a JSON object is called (``a mapping`` in a YAML file).
    """
    show = show or shown
    raws = [_raw(error, data, show, mapping) for error in exc.errors(include_url=False)]
    while any(label for raw in raws for _, label in raw.steps):
        raws = _reduce_unions(raws, show, mapping)
    out: list[Problem] = []
    for raw in raws:
        loc, kind, key = raw.loc(), raw.error["type"], None
        if kind == "unexpected_keyword_argument":  # a Document dataclass's unknown key
            kind = "extra_forbidden"
        message = raw.message
        if raw.on_key and loc:
            key = loc[-1]
        elif kind == "missing" and loc:
            loc, key = loc[:-1], loc[-1]
        elif kind == "extra_forbidden" and loc:
            key = loc[-1]
            allowed = _allowed_keys(model, loc[:-1])
            hint = did_you_mean(key, allowed)
            message = f"unknown key {_key_repr(key)}; {hint}allowed keys: {', '.join(allowed)}"
        out.append(Problem(loc, message, kind, key, raw.on_key))
    return out


def _raw(error: Mapping[str, Any], data: Any, show: Callable[[Any], str], mapping: str) -> _Raw:
    """Mark each step of ``error``'s location as a key of ``data`` or a union branch's label."""
    steps: list[tuple[str | int, bool]] = []
    node, loc, of_key = data, error["loc"], False
    for i, step in enumerate(loc):
        if step == "[key]" and steps and not steps[-1][1]:
            of_key = True  # pydantic's mark of a map's key (the step before) that is wrong
            continue
        if _holds(node, step):
            node = node[step]
            steps.append((step, False))
        elif error["type"] == "missing" and i == len(loc) - 1:
            steps.append((step, False))
        else:
            steps.append((step, True))
    message = _message(error, show, mapping)
    if of_key and message.startswith(("expected ", "a string of ")):
        message = f"not a valid key: {message}"
    return _Raw(steps, error, message, of_key)


def _holds(node: Any, step: str | int) -> bool:
    """Whether ``step`` is a key or an index of ``node``."""
    if isinstance(node, dict):
        return step in node
    return isinstance(node, (list, tuple)) and isinstance(step, int) and -len(node) <= step < len(node)


def _reduce_unions(raws: list[_Raw], show: Callable[[Any], str], mapping: str) -> list[_Raw]:
    """Resolve the outermost union of each error: keep the errors of the branch the value came
    closest to, or merge branches that all refused the value's type into one error."""
    out: list[_Raw] = []
    groups: dict[tuple[Any, ...], dict[Any, list[_Raw]]] = {}  # union point -> branch label -> errors
    order: list[tuple[Any, ...] | _Raw] = []
    for raw in raws:
        first = next((i for i, (_, label) in enumerate(raw.steps) if label), None)
        if first is None:
            order.append(raw)
            continue
        point = tuple(raw.steps[:first])
        if point not in groups:
            groups[point] = {}
            order.append(point)
        groups[point].setdefault(raw.steps[first][0], []).append(
            _Raw(raw.steps[:first] + raw.steps[first + 1 :], raw.error, raw.message, raw.on_key)
        )
    for item in order:
        if isinstance(item, _Raw):
            out.append(item)
            continue
        branches: list[list[_Raw]] = list(groups[item].values())
        depth = len([s for s in item if not s[1]])
        closer = [b for b in branches if not _refused_type(b, depth)]
        if closer:
            best: list[_Raw] = max(closer, key=_closeness)
            out.extend(best)
            continue
        wanted = list(
            dict.fromkeys(r.message[len("expected ") : r.message.index(", got ")] for b in branches for r in b)
        )
        got = branches[0][0].message.split(", got ", 1)[1]
        error = {"type": "union_type", "loc": (), "input": branches[0][0].error.get("input")}
        out.append(_Raw(list(item), error, f"expected {_either(wanted)}, got {got}"))
    return out


def _refused_type(branch: list[_Raw], depth: int) -> bool:
    """Whether a union's branch refused the value for its type alone (``expected a list``)."""
    return all(len(r.loc()) == depth and r.message.startswith("expected ") and ", got " in r.message for r in branch)


def _closeness(branch: list[_Raw]) -> tuple[int, int]:
    """How far a value got into a branch: its deepest error, then its fewest errors."""
    return max(len(r.loc()) for r in branch), -len(branch)


def _either(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _allowed_keys(model: Any, loc: Loc) -> tuple[str, ...]:
    """The keys the model at ``loc`` under ``model`` takes (its fields' aliases), or ``()``."""
    candidates = _expand(model)
    for step in loc:
        following: list[Any] = []
        for tp in candidates:
            following.extend(_expand(_child(tp, step)))
        candidates = following
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
        for name, f in tp.model_fields.items():
            if step in (name, f.alias):
                return f.annotation
        return None
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


__all__ = [
    "INT_LIMIT",
    "Amount",
    "AsWritten",
    "Choice",
    "Count",
    "Document",
    "Env",
    "Expect",
    "FiniteNumber",
    "Id",
    "Integer",
    "Invalid",
    "Items",
    "Key",
    "Loc",
    "Model",
    "Name",
    "Number",
    "OpenDocument",
    "OpenModel",
    "PathText",
    "Problem",
    "QuantityName",
    "Scalar",
    "Text",
    "did_you_mean",
    "json_path",
    "problems",
    "shown",
    "validate",
]
