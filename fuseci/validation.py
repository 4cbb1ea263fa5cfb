"""The typed models of fuseci's documents, validated by pydantic, with errors in fuseci's words: every format
fuseci reads is declared once as :class:`Model` classes (or :class:`Document` dataclasses) built from the annotated
types below; :func:`problems` turns pydantic's errors into one line (``expected an integer, got a string "x"``)."""

from __future__ import annotations

import enum
import math
import re
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, NamedTuple, TypeVar, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    Strict,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
)
from pydantic_core import PydanticCustomError, core_schema

from fuseci.wording import TYPE_ERRORS, Loc, convert, json_path, shown

#: Case, variant and suite ids: what ncu's ``--nvtx-include`` filter can take. Match it only with
#: :func:`fuseci.config.names.is_id` (``fullmatch``): ``re.match`` lets ``$`` match before a newline.
ID_PATTERN = re.compile(r"^[A-Za-z0-9_-]+$")
#: Longest id, for every reader (:data:`Id`): an id names files, and file names end at 255 bytes.
MAX_ID_CHARS = 200

#: Integers a document may hold: counts, sizes and indices fit in 63 bits.
INT_LIMIT = 2**63


class Model(BaseModel):
    """The base of every document model: frozen, strict, closed to unknown keys, finite numbers."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", strict=True, allow_inf_nan=False, populate_by_name=False, regex_engine="rust-regex"
    )


class OpenModel(Model):
    """A :class:`Model` whose unknown keys are left out, not refused (a newer file's new members)."""

    model_config = ConfigDict(extra="ignore")


class Document:
    """The base of a frozen dataclass a document holds: validated as a :class:`Model`, built unchecked by code;
    written (:func:`dump`), a member at its default is left out, but those of :attr:`__always__`."""

    __slots__ = ()
    __pydantic_config__: ClassVar[ConfigDict] = Model.model_config
    __always__: ClassVar[frozenset[str]] = frozenset()
    """Members with a default that a file holds all the same."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        """The dataclass's schema, taking an object (its fields stay strict), written as the class docstring says."""
        schema = handler(source)
        node: Any = schema
        while node["type"].startswith("function-"):  # a model validator wraps the dataclass
            node = node["schema"]
        if node["type"] != "dataclass":
            return schema
        node["strict"] = False
        args = node["schema"]
        while args["type"] != "dataclass-args":
            args = args["schema"]
        cls._shape(args["fields"])
        for f in args["fields"]:
            inner = f["schema"]
            if inner["type"] == "default" and f["name"] not in cls.__always__ and "serialization_exclude" not in f:
                factory = inner.get("default_factory")
                f["serialization_exclude_if"] = _equals(factory() if factory else inner.get("default"))
        return schema

    @classmethod
    def _shape(cls, fields: list[Any]) -> None:
        """A subclass's changes to its fields' schemas before the rule of writing defaults applies."""

    def to_json(self) -> dict[str, Any]:
        """The object a document holds for it (:func:`dump`)."""
        return typing.cast("dict[str, Any]", dump(type(self), self))


def _equals(default: Any) -> Callable[[Any], bool]:
    return lambda value: bool(value == default)


def dump(model: type[Any], value: Any) -> Any:
    """``value`` (of any type :func:`validate` takes) as its document holds it, in JSON's types."""
    return _adapter(model).dump_python(value, mode="json", by_alias=True)


class OpenDocument(Document):
    """A :class:`Document` whose unknown keys are left out, as :class:`OpenModel`'s."""

    __slots__ = ()
    __pydantic_config__: ClassVar[ConfigDict] = OpenModel.model_config


@dataclass(frozen=True, slots=True)
class Expect:
    """Names what a value must be in messages: ``Annotated[str, ..., Expect("an id")]`` says ``expected an id, ...``."""

    what: str
    """The expected value, with its article (``an id (letters, digits, '_' and '-')``)."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        """The inner type's schema, its refusals reworded (pydantic's hook)."""
        what = self.what

        def check(value: Any, inner: ValidatorFunctionWrapHandler) -> Any:
            try:
                return inner(value)
            except ValidationError as exc:
                if not all(e["type"] in TYPE_ERRORS for e in exc.errors()):
                    raise
                raise PydanticCustomError("expected", "expected {what}", {"what": what}) from None

        return core_schema.no_info_wrap_validator_function(check, handler(source))


@dataclass(frozen=True, slots=True)
class Choice:
    """One of a fixed set of strings: ``Annotated[str, Choice(("a", "b"))]``; a value outside them
    is reported with the closest one. Annotating an enum gives the member of the value."""

    values: tuple[str, ...]
    """The strings allowed, in the order messages list them."""
    what: str = ""
    """When set, how a wrong value is named (``unsupported dtype 'f32'; did you mean ...``)."""

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
"""A list of values of one type, held as a tuple (``Items[float]``); only the container is lax."""

Id = Annotated[
    str,
    Field(max_length=MAX_ID_CHARS, pattern=ID_PATTERN.pattern),
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
Amount = Annotated[float, Field(ge=0)]
"""A finite, non-negative number (bytes, times, counts, percentages)."""
Number = Annotated[float, Field(allow_inf_nan=True)]
"""A number that may be infinite or NaN, where a format keeps them (the error of a NaN output)."""


def _as_written(value: Any, inner: ValidatorFunctionWrapHandler) -> Any:
    number = inner(value)
    return value if type(value) is int else number


class _AsWritten:
    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        # written as held: an integer as one, a float as one (an infinite error stays infinite)
        held = core_schema.union_schema([core_schema.int_schema(strict=True), core_schema.float_schema()])
        written = core_schema.plain_serializer_function_ser_schema(lambda x: x, return_schema=held)
        return core_schema.no_info_wrap_validator_function(_as_written, handler(source), serialization=written)


AsWritten = _AsWritten()
"""Keeps an integer an integer where a number is expected, read and written (``3``, not ``3.0``: byte for byte)."""


def null_for_nan(value: Any) -> Any:
    """A number as a file that holds no NaN writes it: NaN or infinite as null, an integer as one."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _nan_for_null(values: Mapping[str, float | None]) -> dict[str, float]:
    return {q: math.nan if x is None else x for q, x in values.items()}


NanForNull = AfterValidator(_nan_for_null)
"""Reads a map's nulls as NaN: a quantity not measured."""

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
    """The key a ``missing`` or ``extra_forbidden`` problem is about, or a map's wrong key."""
    on_key: bool = False
    """True when a map's key itself is wrong: :attr:`loc` ends with the key."""

    @property
    def where(self) -> str:
        """:attr:`loc` as a JSON path (see :func:`json_path`)."""
        return json_path(self.loc)


class Invalid(ValueError):
    """A document's values are not what its format allows; :attr:`problems` lists them all."""

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
    """``data`` (a parsed document, or the part of one found at ``at``) as a ``model``.

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


def problems(
    exc: ValidationError,
    data: Any,
    model: Any = None,
    *,
    show: Callable[[Any], str] | None = None,
    mapping: str = "an object",
) -> list[Problem]:
    """pydantic's errors for ``data`` as fuseci's problems, in pydantic's order, worded by :mod:`fuseci.wording`.

    Args:
        exc: What pydantic raised.
        data: The document it was validated from (union branches are told from keys by it).
        model: The model (or type) ``data`` was validated as, for the keys an unknown key could be.
        show: How a value is written (default :func:`shown`: ``a string "x"``).
        mapping: What a JSON object is called (``a mapping`` in a YAML file).
    """
    return [Problem(*p) for p in convert(exc.errors(include_url=False), data, model, show or shown, mapping)]
