"""The ledger as a versioned JSON document, and back: ``{"format": "fuseci-ledger", "format_version": 1,
"fuseci_version": ..., "ledger": {...}}``, declared by :mod:`fuseci.records.fusion`'s dataclasses and read by
:class:`fuseci.files.versioned.DocumentFormat`. Format history: 1: first version; since added (absent where a file
leaves it out, left out where not recorded, so an older ledger is written back byte for byte): a measurement's
``loads`` and ``stores``, a row's and the ledger's ``excess``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from fuseci import __version__
from fuseci import validation as v
from fuseci.errors import LedgerError
from fuseci.files.atomic import atomic_write_text
from fuseci.files.versioned import DocumentFormat
from fuseci.records.fusion import Ledger

FORMAT = DocumentFormat(
    what="ledger",
    version=1,
    name="fuseci-ledger",
    fix="build it again from the capture and the profile",
    error=LedgerError,
)


@dataclass(frozen=True, slots=True)
class LedgerDocument(v.Document):
    """A ledger file's members after ``format`` and ``format_version``."""

    __always__ = frozenset({"fuseci_version"})

    ledger: Ledger
    fuseci_version: Annotated[str, Field(max_length=100)] = "?"


def from_json(data: Any, path: Path | str) -> Ledger:
    """A ledger from a parsed document.

    Raises:
        LedgerError: not a ledger, newer, or a value its format does not allow (naming file, place and fault).
    """
    body = {k: x for k, x in FORMAT.check(data, path).items() if k not in ("format", "format_version")}
    try:
        return v.validate(LedgerDocument, body).ledger
    except v.Invalid as exc:
        raise FORMAT.invalid(path, exc) from None


def load(path: Path) -> Ledger:
    """Read a ledger file.

    Raises:
        LedgerError: missing, unreadable, over the size limit, or not a ledger.
    """
    try:
        return from_json(FORMAT.load(path), path)
    except FileNotFoundError:
        raise LedgerError(f"{path}: no ledger there; {FORMAT.fix}") from None


#: A suite's stored ledgers, beside its baseline (``baselines/<gpu>/<suite>.ledgers.json``).
SUITE_FORMAT = DocumentFormat(
    what="suite's ledgers",
    version=1,
    name="fuseci-ledgers",
    fix="record them again with `fuseci update-baselines <suite file>` (they are written beside the baseline)",
    error=LedgerError,
)


@dataclass(frozen=True, slots=True)
class SuiteLedgers(v.Document):
    """A suite ledgers file's members after ``format`` and ``format_version``: each ledger
    variant's ledger, keyed ``case/variant``."""

    __always__ = frozenset({"fuseci_version"})

    ledgers: Annotated[dict[Annotated[str, Field(max_length=400)], Ledger], Field(max_length=10_000)]
    fuseci_version: Annotated[str, Field(max_length=100)] = "?"


def suite_path(baseline: Path) -> Path:
    """The ledgers file beside a suite's baseline file."""
    return baseline.with_name(baseline.name.removesuffix(".json") + ".ledgers.json")


def key(case: str, variant: str) -> str:
    """A ledger's key in a suite's ledgers file."""
    return f"{case}/{variant}"


def load_suite(path: Path) -> dict[str, Ledger]:
    """A suite's stored ledgers by :func:`key`; empty when there is no file.

    Raises:
        LedgerError: unreadable, over the size limit, or not a suite's ledgers, naming the place.
    """
    try:
        data = SUITE_FORMAT.load(path)
    except FileNotFoundError:
        return {}
    return suite_from_json(data, path)


def suite_from_json(data: Any, path: Path | str) -> dict[str, Ledger]:
    """A suite's ledgers from a parsed document (see :func:`load_suite`).

    Raises:
        LedgerError: not a suite's ledgers, newer, or a value its format does not allow.
    """
    body = {k: x for k, x in SUITE_FORMAT.check(data, path).items() if k not in ("format", "format_version")}
    try:
        return dict(v.validate(SuiteLedgers, body).ledgers)
    except v.Invalid as exc:
        raise SUITE_FORMAT.invalid(path, exc) from None


def dumps_suite(ledgers: dict[str, Ledger]) -> str:
    """The exact text of a suite's ledgers file (sorted keys, a trailing newline)."""
    return SUITE_FORMAT.dumps(SuiteLedgers(ledgers, __version__).to_json())


def save_suite(ledgers: dict[str, Ledger], path: Path) -> None:
    """Write a suite's ledgers file atomically, never through a symbolic link (``errno.ELOOP``:
    the caller refuses a link first, so this is a link made since)."""
    atomic_write_text(path, dumps_suite(ledgers), links=False)
