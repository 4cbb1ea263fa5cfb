"""Fusion ledgers read from files and compared, for ``fuseci ledger``: a ledger, a suite's ledgers or a results
file (told apart by ``format``; ``.xz`` decompressed first), each read as untrusted JSON by its own reader, each
failure one line naming the file, the place and the fix."""

from __future__ import annotations

import enum
import lzma
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fuseci.errors import EXIT_PASS, LedgerError, UsageError
from fuseci.files.versioned import DocumentFormat, read_bounded
from fuseci.ledger import store
from fuseci.ledger.diff import diff
from fuseci.ledger.gate import LedgerVerdict, judge
from fuseci.records.fusion import Ledger, NodeChange
from fuseci.store import results

#: What a file that is none of the three is told.
FIX = (
    "give a ledger file: a suite's <suite>.ledgers.json (written beside its baseline by `fuseci update-baselines`), "
    "a results file of `fuseci run --json`, or a single ledger"
)
#: Keys named in one message before "and N more".
_LISTED = 8


class FileKind(enum.Enum):
    """Which document a ledger file is."""

    LEDGER = "ledger"
    SUITE = "suite's ledgers"
    RESULTS = "results file"


class _Sniff(DocumentFormat):
    """Reads any JSON object as :class:`DocumentFormat` reads a document, and checks nothing more."""

    __slots__ = ()

    def check(self, data: Any, path: Path | str) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise self.fail(path, f"not a ledger file (a JSON {type(data).__name__}, not an object)")
        return data


_ANY = _Sniff(
    what="ledger file",
    version=1,
    fix=FIX,
    error=LedgerError,
    max_bytes=max(store.FORMAT.max_bytes, store.SUITE_FORMAT.max_bytes, results.FORMAT.max_bytes),
)


@dataclass(frozen=True, slots=True)
class LedgerFile:
    """The ledgers of one file."""

    path: Path
    kind: FileKind
    ledgers: Mapping[str, Ledger]
    """By key (``case/variant``); a single ledger's file holds one, keyed :data:`SINGLE`."""
    about: tuple[str, ...] = ()
    """What the file says of where its ledgers come from: ``fuseci 0.4.0``, ``PyTorch 2.11.0``."""

    @property
    def single(self) -> bool:
        """True for a file of one ledger without a key."""
        return self.kind is FileKind.LEDGER


#: The key of a single ledger's file: it has none of its own.
SINGLE = "ledger"


def _shown(value: Any, limit: int = 40) -> str | None:
    """A version string a file states, when it is a short printable one."""
    if isinstance(value, str) and value and value != "?" and value.isprintable() and len(value) <= limit:
        return value
    return None


def _from_results(data: dict[str, Any], path: Path) -> tuple[dict[str, Ledger], tuple[str, ...]]:
    """The ledgers of a results file by ``case/variant``, and the PyTorch and Triton it ran."""
    out: dict[str, Ledger] = {}
    owner: dict[str, str] = {}
    about: dict[str, None] = {}
    for c in results.from_json(results.FORMAT.check(data, path), path):
        for case in c.cases:
            for v in case.variants:
                if v.ledger is None:
                    continue
                key = store.key(case.case, v.variant)
                if key in out:
                    raise LedgerError(
                        f"{path}: two ledgers of {key[:200]!r} (suites {owner[key][:100]!r} and {c.suite[:100]!r}); "
                        "compare the results file of one suite (`fuseci run SUITE --json FILE`)"
                    )
                out[key], owner[key] = v.ledger, c.suite
                for field, name in (("torch_version", "PyTorch"), ("triton_version", "Triton")):
                    version = _shown(c.env.get(field))
                    if version:
                        about[f"{name} {version}"] = None
    return out, tuple(about)


def _xz_text(path: Path) -> str:
    """An ``.xz`` ledger file's text, decompressed up to the largest ledger file read (LedgerError beyond it)."""
    try:
        raw = read_bounded(path, _ANY.max_bytes)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _ANY.fail(path, f"cannot read the ledger file: {exc.strerror or exc}") from None
    unpack = lzma.LZMADecompressor()
    try:
        plain = unpack.decompress(raw, max_length=_ANY.max_bytes + 1)
    except lzma.LZMAError as exc:
        raise _ANY.fail(path, f"cannot decompress ({exc}); is it a complete .xz file?") from None
    if len(plain) > _ANY.max_bytes:
        raise _ANY.fail(path, f"decompresses to over {_ANY.max_bytes >> 20} MiB, more than any ledger file")
    if not unpack.eof:
        raise _ANY.fail(path, "the .xz stream ends early; is it a complete .xz file?")
    try:
        return plain.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _ANY.fail(path, f"not UTF-8 text once decompressed (byte {exc.start})") from None


def read(path: Path) -> LedgerFile:
    """The ledgers of ``path``: a ledger, a suite's ledgers or a results file.

    Raises:
        LedgerError: missing, unreadable, not one of the three, invalid, or holding no ledger.
    """
    try:
        data = _ANY.parse(_xz_text(path), path) if path.name.endswith(".xz") else _ANY.load(path)
    except FileNotFoundError:
        raise LedgerError(f"{path}: no such file; {FIX}") from None
    fuseci = _shown(data.get("fuseci_version"))
    about = (f"fuseci {fuseci}",) if fuseci else ()
    kind = data.get("format")
    if kind == store.FORMAT.name:
        return LedgerFile(path, FileKind.LEDGER, {SINGLE: store.from_json(data, path)}, about)
    if kind == store.SUITE_FORMAT.name:
        file = LedgerFile(path, FileKind.SUITE, store.suite_from_json(data, path), about)
    elif kind is None and "suites" in data:
        found, versions = _from_results(data, path)
        file = LedgerFile(path, FileKind.RESULTS, found, (*about, *versions))
    else:
        what = f"a {str(kind)[:40]!r} document" if kind is not None else "a document without suites or a format"
        raise LedgerError(f"{path}: not a ledger file (it is {what}); {FIX}")
    if not file.ledgers:
        why = (
            "no variant of it has a ledger (a variant with `ledger:` in its suite has one)"
            if file.kind is FileKind.RESULTS
            else "it holds none"
        )
        raise LedgerError(f"{path}: no ledger in this {file.kind.value}: {why}")
    return file


def _keys(items: Sequence[str]) -> str:
    shown = ", ".join(k[:200] for k in items[:_LISTED])
    return f"{shown} and {len(items) - _LISTED} more" if len(items) > _LISTED else shown


def select(file: LedgerFile, keys: Sequence[str]) -> dict[str, Ledger]:
    """The ledgers of ``file`` named by ``keys`` (all of them without), in the order asked.

    Raises:
        LedgerError: a key the file does not hold (the message lists those it does).
    """
    if file.single or not keys:
        return dict(file.ledgers)
    missing = [k for k in keys if k not in file.ledgers]
    if missing:
        raise LedgerError(
            f"{file.path}: no ledger {missing[0][:200]!r} in this {file.kind.value}; it holds "
            f"{_keys(sorted(file.ledgers))} (--key CASE/VARIANT)"
        )
    return {k: file.ledgers[k] for k in dict.fromkeys(keys)}


@dataclass(frozen=True, slots=True)
class KeyDiff:
    """One ledger of NEW against OLD's of the same key."""

    key: str
    old: Ledger
    new: Ledger
    changes: tuple[NodeChange, ...]
    """Every node whose company changed (:func:`fuseci.ledger.diff.diff`)."""
    verdict: LedgerVerdict
    """The gate's findings as if NEW were judged against OLD."""


@dataclass(frozen=True, slots=True)
class FilesDiff:
    """Two files' ledgers compared, key by key."""

    old: LedgerFile
    new: LedgerFile
    diffs: tuple[KeyDiff, ...]
    only_old: tuple[str, ...] = ()
    """Keys OLD holds and NEW does not (none when keys were asked for)."""
    only_new: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        """1 when a finding of any key regressed, else 0."""
        return max((d.verdict.exit_code for d in self.diffs), default=EXIT_PASS)


def _one_of(file: LedgerFile, keys: Sequence[str], other: LedgerFile) -> list[str]:
    """The keys of ``file`` to pair with ``other``'s single ledger: those asked, or its only one."""
    if keys:
        return list(select(file, keys))
    if len(file.ledgers) == 1:
        return list(file.ledgers)
    raise UsageError(
        f"{other.path} is one ledger and {file.path} holds {len(file.ledgers)} ({_keys(sorted(file.ledgers))}): "
        "name the one to compare with --key CASE/VARIANT"
    )


def _pairs(
    old: LedgerFile, new: LedgerFile, keys: Sequence[str]
) -> tuple[list[tuple[str, str, str]], list[str], list[str]]:
    """(key shown, OLD's key, NEW's key) of each comparison; the keys of only one side."""
    if old.single and new.single:
        return [(SINGLE, SINGLE, SINGLE)], [], []
    if old.single:
        return [(k, SINGLE, k) for k in _one_of(new, keys, old)], [], []
    if new.single:
        return [(k, k, SINGLE) for k in _one_of(old, keys, new)], [], []
    if keys:
        select(old, keys)
        select(new, keys)
        return [(k, k, k) for k in dict.fromkeys(keys)], [], []
    both = [k for k in old.ledgers if k in new.ledgers]
    if not both:
        raise LedgerError(
            f"{old.path} and {new.path} hold no ledger of one key: {_keys(sorted(old.ledgers))} against "
            f"{_keys(sorted(new.ledgers))}; compare two recordings of one suite"
        )
    return (
        [(k, k, k) for k in both],
        [k for k in old.ledgers if k not in new.ledgers],
        [k for k in new.ledgers if k not in old.ledgers],
    )


def diff_files(old: LedgerFile, new: LedgerFile, keys: Sequence[str] = ()) -> FilesDiff:
    """NEW's ledgers against OLD's, in OLD's order (without ``keys``, every key both hold), node by node and gated.

    Raises:
        LedgerError: a key asked for that a file does not hold, or no key in both.
        UsageError: a single ledger against a file of several, without a key to choose one.
    """
    pairs, only_old, only_new = _pairs(old, new, keys)
    diffs = []
    for shown, a, b in pairs:
        before, now = old.ledgers[a], new.ledgers[b]
        diffs.append(KeyDiff(shown, before, now, tuple(diff(before, now)), judge(before, now)))
    return FilesDiff(old, new, tuple(diffs), tuple(only_old), tuple(only_new))


#: ``fuseci ledger diff --json``'s document.
DIFF_FORMAT = DocumentFormat(
    what="ledger diff",
    version=1,
    name="fuseci-ledger-diff",
    fix="it is written by `fuseci ledger diff OLD NEW --json PATH`",
    error=LedgerError,
)


def _totals(ledger: Ledger) -> dict[str, Any]:
    return {
        "dram_bytes": ledger.measured_bytes,
        "floor_bytes": ledger.floor_bytes,
        "kernel_calls": len(ledger.rows),
        "graphs": len(ledger.graphs),
    }


def _change(c: NodeChange) -> dict[str, Any]:
    def rows(figures: Sequence[Any]) -> list[dict[str, Any]]:
        return [{"kernel": r.kernel, "dram_bytes": r.dram_bytes, "duration_ns": r.duration_ns} for r in figures]

    return {
        "node": c.node,
        "was_with": list(c.was_with),
        "now_with": list(c.now_with),
        "before": rows(c.before),
        "after": rows(c.after),
        "line": c.line(),
    }


def _file(f: LedgerFile) -> dict[str, Any]:
    return {"path": str(f.path), "kind": f.kind.value, "about": list(f.about)}


def dumps(result: FilesDiff) -> str:
    """The JSON document of a comparison: both files, then per key both sides' totals, node changes and findings.

    Raises:
        LedgerError: the document is over what a reader takes.
    """
    ledgers = [
        {
            "key": d.key,
            "old": _totals(d.old),
            "new": _totals(d.new),
            "verdict": d.verdict.verdict.value,
            "changes": [_change(c) for c in d.changes],
            "findings": [
                {
                    "kind": f.kind.value,
                    "verdict": f.verdict.value,
                    "message": f.message,
                    "kernels": list(f.kernels),
                    "nodes": list(f.nodes),
                }
                for f in d.verdict.findings
            ],
        }
        for d in result.diffs
    ]
    return DIFF_FORMAT.dumps(
        {
            "old": _file(result.old),
            "new": _file(result.new),
            "exit_code": result.exit_code,
            "ledgers": ledgers,
            "only_old": list(result.only_old),
            "only_new": list(result.only_new),
        }
    )
