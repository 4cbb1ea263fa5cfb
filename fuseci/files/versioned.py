"""What every versioned JSON document of fuseci shares: reading a file as hostile input (bounded
in size, depth and integer length, no lone surrogates, no key named twice), the ``format`` and
``format_version`` check, upgrades of older versions, and exact writing."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fuseci import __version__
from fuseci.errors import FuseciError, ReportError
from fuseci.validation import Invalid, json_path, shown

#: Deepest nesting of arrays and objects read; fuseci's documents need about 8 levels.
MAX_DEPTH = 32
#: Longest integer literal read; no count, size or id fuseci writes comes near it.
MAX_INT_DIGITS = 40

Upgrade = Callable[[dict[str, Any]], dict[str, Any]]


class DocumentError(ValueError):
    """The content of a document is not what its format allows; :attr:`where` says where."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        """What is wrong."""
        self.keys: list[str | int] = []
        """The JSON path of the value, innermost first (filled in as the error leaves each level)."""

    @property
    def where(self) -> str:
        """The value's JSON path (``cases.bias_gelu``); empty for the document itself."""
        return json_path(self.keys[::-1])


class _Repeated(dict[str, Any]):
    """An object that named a key more than once; :func:`_check_tree` reports it with its place."""

    __slots__ = ("repeated",)

    def __init__(self, pairs: list[tuple[str, Any]], repeated: str) -> None:
        super().__init__(pairs)
        self.repeated = repeated
        """The first key named twice."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, remembering a key named twice (which of two ``"cases"`` to believe is not for fuseci to guess)."""
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return _Repeated(pairs, key)
        seen.add(key)
    return obj  # not reached: fewer keys than pairs means one came twice


def _reject_constant(name: str) -> float:
    raise DocumentError(f"{name} is not a number this document may hold")


def _bounded_int(text: str) -> int:
    digits = text.lstrip("-")
    if len(digits) > MAX_INT_DIGITS:
        raise DocumentError(f"an integer of {len(digits)} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _check_tree(value: Any, depth: int = 0) -> None:
    """Bounded nesting, no lone surrogates and no key named twice; the path is gathered on the way out."""
    if depth > MAX_DEPTH:
        raise DocumentError(f"nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise DocumentError(f"a string holds a lone surrogate: {value[:40]!a}") from None
    elif isinstance(value, dict | list):
        if isinstance(value, _Repeated):
            key = json.dumps(value.repeated[:60], ensure_ascii=True) + ("..." if len(value.repeated) > 60 else "")
            where = "this object" if depth else "the top-level object"
            raise DocumentError(f"the key {key} appears twice in {where}; a document names each key once")
        for k, v in value.items() if isinstance(value, dict) else enumerate(value):
            try:
                _check_tree(k, depth + 1)  # a key's surrogates; an index passes (or is as deep as its value)
                _check_tree(v, depth + 1)
            except DocumentError as exc:
                exc.keys.append(k)
                raise


#: An escaped surrogate (``\\ud800``; also half of a good pair).
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def _may_hold_surrogate(text: str) -> bool:
    """Whether any string of the document may be a lone surrogate (escaped, or in the text)."""
    if "\\u" in text and _ESCAPED_SURROGATE.search(text):
        return True
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _shallow(data: Any) -> bool:
    """True when no value lies deeper than :data:`MAX_DEPTH`, walking arrays and objects only."""
    level = [data] if isinstance(data, dict | list) else []
    for _ in range(MAX_DEPTH):
        if not level:
            return True
        level = [v for x in level for v in (x.values() if isinstance(x, dict) else x) if isinstance(v, dict | list)]
    return not any(level)


def read_bounded(path: Path, max_bytes: int) -> bytes:
    """At most ``max_bytes + 1`` bytes of a regular file; anything else is refused before anything is read.

    Raises:
        FileNotFoundError: nothing at ``path``.
        OSError: not a regular file (``errno`` unset, message says what it is), or unreadable.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            what = "a directory" if stat.S_ISDIR(mode) else "not a regular file (a device, FIFO or socket)"
            raise OSError(f"is {what}")
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with fh:
        return fh.read(max_bytes + 1)


@dataclass(frozen=True, slots=True)
class DocumentFormat:
    """One versioned JSON format: how to check, upgrade, read and write its documents."""

    what: str
    """What a document of this format is called in messages (``harness record``)."""
    version: int
    """The version this fuseci writes."""
    fix: str
    """How to get a good document, quoted in every error."""
    name: str | None = None
    """The ``format`` field's value; None for formats that never had one."""
    error: type[FuseciError] = ReportError
    """What reading raises."""
    upgrades: Mapping[int, Upgrade] = field(default_factory=dict)
    """``upgrades[n]`` turns a version-``n`` document into a version-``n+1`` one."""
    allow_nan: bool = False
    """Whether ``NaN`` and ``Infinity`` may appear (a harness record's error of an output that held NaN)."""
    max_bytes: int = 64 << 20
    """Largest file read."""
    lookalike: Callable[[Any], str] | None = None
    """Says what a document that is not of this format looks like instead (or ``""``)."""

    def fail(self, path: Path | str, problem: str) -> FuseciError:
        """The one-line error for ``path``."""
        return self.error(f"{path}: {problem}; {self.fix}")

    def invalid(self, path: Path | str, exc: Invalid) -> FuseciError:
        """The one-line error for the first value of ``path`` that its format does not allow."""
        return self.fail(path, f"{exc.where}: {exc.problem}" if exc.where else exc.problem)

    def parse(self, text: str, path: Path | str) -> dict[str, Any]:
        """Parse a document's text, check its format and version, and upgrade it.

        Raises:
            FuseciError: (:attr:`error`) not JSON, over a limit, not this format, or newer.
        """
        repeated: list[dict[str, Any]] = []

        def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
            obj = _object(pairs)
            if isinstance(obj, _Repeated):
                repeated.append(obj)
            return obj

        try:
            data = json.loads(
                text,
                parse_int=_bounded_int,
                parse_constant=(lambda c: float(c)) if self.allow_nan else _reject_constant,
                object_pairs_hook=pairs_hook,
            )
            # The walk of every value, which also says where a problem is, only where one may be.
            if repeated or _may_hold_surrogate(text) or not _shallow(data):
                _check_tree(data)
        except json.JSONDecodeError as exc:
            raise self.fail(f"{path}:{exc.lineno}:{exc.colno}", f"not JSON ({exc.msg}), so not a {self.what}") from None
        except DocumentError as exc:
            where = f"{exc.where}: " if exc.where else ""
            raise self.fail(path, f"not a valid {self.what}: {where}{exc.problem}") from None
        except (ValueError, RecursionError) as exc:
            raise self.fail(path, f"not a valid {self.what}: {exc}") from None
        return self.check(data, path)

    def check(self, data: Any, path: Path | str) -> dict[str, Any]:
        """Check an already-parsed document's format and version, and upgrade it."""
        if not isinstance(data, dict) or (self.name is not None and data.get("format") != self.name):
            hint = self.lookalike(data) if self.lookalike else ""
            raise self.fail(path, f"not a fuseci {self.what}{f' ({hint})' if hint else ''}")
        version = data.get("format_version")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise self.fail(path, f"invalid {self.what} format_version: {shown(version)}")
        if version > self.version:
            writer = data.get("fuseci_version", "?")
            if not (isinstance(writer, str) and writer.isprintable() and len(writer) <= 40):
                writer = shown(writer)
            raise self.error(
                f"{path}: {self.what} format {version} was written by a newer fuseci ({writer}); this is fuseci "
                f"{__version__}, which reads format {self.version}: upgrade fuseci"
            )
        while version < self.version:
            data = self.upgrades[version](data)
            version += 1
        return data

    def load(self, path: Path) -> dict[str, Any]:
        """Read ``path`` as a document of this format: checked, upgraded.

        Raises:
            FileNotFoundError: nothing at ``path`` (callers say what a missing file means).
            FuseciError: (:attr:`error`) unreadable, over a limit, malformed, or newer.
        """
        try:
            raw = read_bounded(path, self.max_bytes)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise self.fail(path, f"cannot read the {self.what}: {exc.strerror or exc}") from None
        if len(raw) > self.max_bytes:
            raise self.fail(path, f"over {self.max_bytes >> 20} MiB, more than any {self.what}")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(path, f"not UTF-8 text (byte {exc.start}), so not a {self.what}") from None
        return self.parse(text, path)

    def document(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A document's object: ``body`` with ``format`` and ``format_version`` added."""
        return {**body, "format_version": self.version, **({"format": self.name} if self.name is not None else {})}

    def text(self, body: Mapping[str, Any], *, indent: int = 2) -> str:
        """The exact text of a document (:meth:`document`): keys sorted, a trailing newline."""
        return json.dumps(self.document(body), indent=indent, sort_keys=True, allow_nan=self.allow_nan) + "\n"

    def dumps(self, body: Mapping[str, Any], *, indent: int = 2) -> str:
        """The exact text of a document to write (:meth:`text`), never one too big for :meth:`load`.

        Raises:
            FuseciError: (:attr:`error`) the text is over :attr:`max_bytes`.
        """
        text = self.text(body, indent=indent)
        size = len(text) if len(text) * 4 <= self.max_bytes else len(text.encode("utf-8", "surrogatepass"))
        if size > self.max_bytes:
            raise self.error(
                f"a {self.what} of {size:,} bytes is more than the {self.max_bytes:,} bytes fuseci reads back, so it "
                "is not written: split what it holds over several files"
            )
        return text
