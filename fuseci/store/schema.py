"""The shapes of the JSON documents fuseci reads, stated once per format and checked at the edge.

Each format (:mod:`fuseci.store.baselines`, :mod:`fuseci.measure.record`,
:mod:`fuseci.store.results`, :mod:`fuseci.store.runs`) declares its document as a tree of the
small specs below and checks a parsed document against it with :func:`validate` before building
its typed dataclasses, so the builders meet only documents of the right shape: every type, range,
finite number, enum value, size and id is checked here. The first violation raises a
:class:`SchemaError` naming its place as a JSON path (``cases.bias_gelu.timings[0].median_ns``)
and what is wrong with it; the format's reader turns that into its one-line error naming the file
and the fix (:meth:`fuseci.store.versioned.DocumentFormat.invalid`).

Depth, integer size, ``NaN`` and lone surrogates are bounded while parsing
(:mod:`fuseci.store.versioned`); what a number may be (finite or not, its range) is decided here,
field by field.
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any, Protocol

from fuseci.config import names

#: Integers a document may hold: counts, sizes and indices fit in 63 bits.
INT_LIMIT = 2**63
_KEY = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")


class SchemaError(ValueError):
    """A document's value is not what its format allows."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}" if where else problem)
        self.where = where
        """The JSON path of the value (empty for the whole document)."""
        self.problem = problem
        """What is wrong with it, and what was expected."""


def sub(where: str, key: str | int) -> str:
    """The JSON path of ``key`` under ``where``: ``a.b``, ``a[0]``, or ``a["dram__bytes.sum"]``."""
    if isinstance(key, int):
        return f"{where}[{key}]"
    if len(key) > 60:
        return f"{where}[{json.dumps(key[:60])}...]"
    if not where and _KEY.match(key):
        return key
    return where + _member(key)


@functools.lru_cache(maxsize=4096)
def _member(key: str) -> str:
    """``.b`` or ``["dram__bytes.sum"]``: the step of a key of at most 60 characters in a path.
    Every value of a document is checked under its path, so the same few keys (metric and field
    names) come back thousands of times a document: each is formatted once (and only short keys
    are kept, so a hostile document cannot fill the cache with long ones)."""
    return f".{key}" if _KEY.match(key) else f"[{json.dumps(key)}]"


def shown(value: Any) -> str:
    """A value in a message: its JSON type and a short, one-line rendering."""
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
        if isinstance(value, list)
        else "an object"
        if isinstance(value, dict)
        else type(value).__name__
    )
    if isinstance(value, (dict, list)):
        return f"{kind} of {len(value)}"
    text = json.dumps(value, allow_nan=True)
    return f"{kind} {text[:60]}{'...' if len(text) > 60 else ''}"


class Spec(Protocol):
    """What every spec does: accept a value or raise :class:`SchemaError` naming ``where``."""

    def check(self, value: Any, where: str) -> None:
        """Check ``value``, found at the JSON path ``where``.

        Raises:
            SchemaError: the value does not fit.
        """


@dataclass(frozen=True, slots=True)
class Str:
    """A string of at most :attr:`max_len` characters, matching :attr:`pattern` or one of :attr:`choices`."""

    max_len: int = 4096
    """Longest string taken."""
    pattern: re.Pattern[str] | None = None
    """When set, the whole string must match it."""
    what: str = "a string"
    """How the expected value is named in messages (``an id``)."""
    choices: tuple[str, ...] = ()
    """When set, the string must be one of these."""

    def check(self, value: Any, where: str) -> None:
        """See :meth:`Spec.check`."""
        if not isinstance(value, str):
            raise SchemaError(where, f"expected {self.what}, got {shown(value)}")
        if len(value) > self.max_len:
            raise SchemaError(where, f"a string of {len(value)} characters, more than the {self.max_len} allowed")
        if self.choices and value not in self.choices:
            raise SchemaError(where, f"{shown(value)} is not one of {', '.join(map(repr, self.choices))}")
        if self.pattern is not None and not self.pattern.fullmatch(value):
            raise SchemaError(where, f"expected {self.what}, got {shown(value)}")


@dataclass(frozen=True, slots=True)
class Int:
    """An integer (not a boolean) in ``[minimum, maximum)``."""

    minimum: int = 0
    """Smallest value taken."""
    maximum: int = INT_LIMIT
    """First value refused."""

    def check(self, value: Any, where: str) -> None:
        """See :meth:`Spec.check`."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise SchemaError(where, f"expected an integer, got {shown(value)}")
        if not self.minimum <= value < self.maximum:
            raise SchemaError(where, f"{value} is out of range (from {self.minimum} to below {self.maximum})")


@dataclass(frozen=True, slots=True)
class Num:
    """A number (an integer or a float, not a boolean), finite unless :attr:`finite` is False."""

    minimum: float = -math.inf
    """Smallest value taken (NaN, where allowed, is not compared)."""
    finite: bool = True
    """False where the format keeps ``Infinity`` or ``NaN`` (the error of a NaN output)."""

    def check(self, value: Any, where: str) -> None:
        """See :meth:`Spec.check`."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SchemaError(where, f"expected a number, got {shown(value)}")
        if isinstance(value, float) and not math.isfinite(value):
            if self.finite:
                raise SchemaError(where, f"expected a finite number, got {value}")
            if math.isnan(value):
                return
        if value < self.minimum:
            raise SchemaError(where, f"{value} is below the smallest value allowed, {self.minimum:g}")


@dataclass(frozen=True, slots=True)
class Bool:
    """``true`` or ``false``."""

    def check(self, value: Any, where: str) -> None:
        """See :meth:`Spec.check`."""
        if not isinstance(value, bool):
            raise SchemaError(where, f"expected true or false, got {shown(value)}")


@dataclass(frozen=True, slots=True)
class Nullable:
    """``null`` or a value of :attr:`spec`."""

    spec: Spec
    """What a non-null value must be."""

    def check(self, value: Any, where: str) -> None:
        """See :meth:`Spec.check`."""
        if value is not None:
            self.spec.check(value, where)


@dataclass(frozen=True, slots=True)
class OneOf:
    """A value that fits one of :attr:`specs` (the last one's complaint is reported)."""

    specs: tuple[Spec, ...]
    """The alternatives, tried in order."""

    def check(self, value: Any, where: str) -> None:
        """See :meth:`Spec.check`."""
        last: SchemaError | None = None
        for spec in self.specs:
            try:
                spec.check(value, where)
                return
            except SchemaError as exc:
                last = exc
        if last is not None:
            raise last


@dataclass(frozen=True, slots=True)
class List:
    """A list of at most :attr:`max_len` values of :attr:`item`."""

    item: Spec
    """What every element must be."""
    max_len: int = 1_000_000
    """Longest list taken."""

    def check(self, value: Any, where: str) -> None:
        """See :meth:`Spec.check`."""
        if not isinstance(value, list):
            raise SchemaError(where, f"expected a list, got {shown(value)}")
        if len(value) > self.max_len:
            raise SchemaError(where, f"a list of {len(value)}, more than the {self.max_len} allowed")
        for i, v in enumerate(value):
            self.item.check(v, sub(where, i))


@dataclass(frozen=True, slots=True)
class Tuple:
    """A list of one value per spec, in order (a baseline's ``[name, grid, block, registers]``);
    the last :attr:`optional` positions may be left out."""

    items: tuple[Spec, ...]
    """What each position must be."""
    optional: int = 0
    """How many of the last positions may be missing."""

    def check(self, value: Any, where: str) -> None:
        """See :meth:`Spec.check`."""
        least = len(self.items) - self.optional
        if not isinstance(value, list) or not least <= len(value) <= len(self.items):
            sizes = f"{least} to {len(self.items)}" if self.optional else str(len(self.items))
            raise SchemaError(where, f"expected a list of {sizes}, got {shown(value)}")
        for i, (spec, v) in enumerate(zip(self.items, value, strict=False)):
            spec.check(v, sub(where, i))


@dataclass(frozen=True, slots=True)
class Map:
    """An object with free keys (ids, quantity names) of :attr:`key`, each value of :attr:`value`."""

    value: Spec
    """What every value must be."""
    key: Str = Str(max_len=200)
    """What every key must be."""
    max_len: int = 100_000
    """Most entries taken."""

    def check(self, value: Any, where: str) -> None:
        """See :meth:`Spec.check`."""
        if not isinstance(value, dict):
            raise SchemaError(where, f"expected an object, got {shown(value)}")
        if len(value) > self.max_len:
            raise SchemaError(where, f"an object of {len(value)} entries, more than the {self.max_len} allowed")
        for k, v in value.items():
            self.key.check(k, sub(where, k))
            self.value.check(v, sub(where, k))


@dataclass(frozen=True, slots=True)
class Field:
    """One named member of an :class:`Obj`."""

    spec: Spec
    """What its value must be."""
    required: bool = True
    """False when the member may be absent (readers then use its default)."""


@dataclass(frozen=True, slots=True)
class Obj:
    """An object with named members; unknown ones are refused when :attr:`closed`."""

    members: Mapping[str, Field]
    """The members the format knows."""
    closed: bool = False
    """True where the reader passes the object's members to a dataclass as they are (a timing),
    so that an unknown member (a misspelt key) is an error rather than a crash or a silent loss."""

    def check(self, value: Any, where: str) -> None:
        """See :meth:`Spec.check`."""
        if not isinstance(value, dict):
            raise SchemaError(where, f"expected an object, got {shown(value)}")
        for name, member in self.members.items():
            if name in value:
                member.spec.check(value[name], sub(where, name))
            elif member.required:
                raise SchemaError(where, f"missing required member {name!r}")
        if self.closed:
            unknown = sorted(str(k) for k in value if k not in self.members)
            if unknown:
                close = difflib.get_close_matches(unknown[0], list(self.members), n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise SchemaError(
                    sub(where, unknown[0][:60]), f"unknown member; {hint}the members are {', '.join(self.members)}"
                )


@dataclass(frozen=True, slots=True)
class Custom:
    """A check no spec above states (a cross-field rule): ``fn(value, where)`` raises or returns."""

    fn: Callable[[Any, str], None]
    """The check."""

    def check(self, value: Any, where: str) -> None:
        """See :meth:`Spec.check`."""
        self.fn(value, where)


def validate(spec: Spec, document: Any, where: str = "") -> None:
    """Check a parsed document (or a part of one, at ``where``) against ``spec``.

    Raises:
        SchemaError: the first value that does not fit, with its JSON path.
    """
    spec.check(document, where)


# --- specs shared by several formats -------------------------------------------------------

ID = Str(
    max_len=names.MAX_ID_CHARS,
    pattern=re.compile(names.ID_PATTERN.pattern),
    what="an id (letters, digits, '_' and '-')",
)
"""A suite, case or variant id, as the suite loader takes them (:func:`fuseci.config.names.is_id`)."""
QUANTITY = Str(max_len=200, pattern=re.compile(r"[A-Za-z0-9_.]+"), what="a quantity name")
"""A quantity's name: an ncu metric, verbatim, or one of fuseci's (``launches``, ``event_time.iqr``)."""
NAME = Str(max_len=1 << 16, what="a name")
"""A kernel's name as ncu reports it (C++ templates make them long)."""
TEXT = Str(max_len=1 << 20, what="text")
"""A message, description or note."""
PATH = Str(max_len=4096, what="a path")
"""A file's path, as written into a document."""
COUNT = Int()
"""A non-negative integer below 2**63."""
AMOUNT = Num(minimum=0)
"""A finite, non-negative number (bytes, times, counts, percentages)."""
SCALAR = OneOf((Nullable(Str(max_len=4096)), Bool(), Int(minimum=-INT_LIMIT), Num()))
"""An environment value: a string, a finite number, a boolean or null."""
ENV = Map(SCALAR, key=Str(max_len=200), max_len=1000)
"""An environment fingerprint and the facts beside it."""


def dataclass_spec(
    cls: type, overrides: Mapping[str, Spec] | None = None, *, closed: bool = True, optional: bool = False
) -> Obj:
    """The :class:`Obj` of a dataclass whose members a document holds as they are: each field's
    spec from its annotation (``int`` counts, ``float`` amounts, ``X | None``, ``tuple[X, ...]``,
    ``str`` text, ``bool``; see :data:`BY_ANNOTATION`), or from ``overrides``; required when it
    has no default (or never, with ``optional``: documents that may leave any member out).

    A new optional field of a plain type needs no change here; one of another type, or with a
    range of its own, is one line of ``overrides``.

    Raises:
        TypeError: a field's annotation has no spec and no override (a bug, found on import).
    """
    overrides = overrides or {}
    members: dict[str, Field] = {}
    for f in fields(cls):
        spec = overrides.get(f.name) or BY_ANNOTATION.get(str(f.type))
        if spec is None:
            raise TypeError(f"{cls.__name__}.{f.name}: no spec for {f.type!r}; add an override")
        required = not optional and f.default is MISSING and f.default_factory is MISSING
        members[f.name] = Field(spec, required=required)
    return Obj(members, closed=closed)


#: The spec of each annotation :func:`dataclass_spec` knows, as ``from __future__ import
#: annotations`` leaves it (a string).
BY_ANNOTATION: dict[str, Spec] = {
    "str": TEXT,
    "bool": Bool(),
    "int": COUNT,
    "float": AMOUNT,
    "str | None": Nullable(TEXT),
    "bool | None": Nullable(Bool()),
    "int | None": Nullable(COUNT),
    "float | None": Nullable(AMOUNT),
    "tuple[str, ...]": List(TEXT, max_len=1_000_000),
    "tuple[int, ...]": List(COUNT, max_len=10_000_000),
    "tuple[float, ...]": List(AMOUNT, max_len=10_000_000),
}


def members(**specs: Spec | tuple[Spec, bool]) -> dict[str, Field]:
    """``Obj`` members from keywords: ``name=spec`` (required) or ``name=(spec, False)`` (optional)."""
    out: dict[str, Field] = {}
    for name, s in specs.items():
        out[name] = Field(s[0], s[1]) if isinstance(s, tuple) else Field(s)
    return out


__all__ = [
    "AMOUNT",
    "COUNT",
    "ENV",
    "ID",
    "NAME",
    "PATH",
    "QUANTITY",
    "SCALAR",
    "TEXT",
    "Bool",
    "Custom",
    "Field",
    "Int",
    "List",
    "Map",
    "Nullable",
    "Num",
    "Obj",
    "OneOf",
    "SchemaError",
    "Spec",
    "Str",
    "Tuple",
    "dataclass_spec",
    "members",
    "shown",
    "sub",
    "validate",
]
