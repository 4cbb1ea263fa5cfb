"""``.ncu-rep`` → one tidy row per profiled kernel, through NVIDIA's ``ncu_report`` reader; and whether a report's
kernels and a harness record are one run's (:func:`mismatch`), so no report is judged, nor its baseline rewritten,
as another GPU's."""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import lzma
import math
import os
import stat
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fuseci.config import names, quantities
from fuseci.errors import ReportError
from fuseci.frames import repeats as repeated
from fuseci.records.fusion import METRICS, REQUESTED, SHAPE, KernelRow, Repeats, kernel_row

if TYPE_CHECKING:
    from fuseci.records.harness import HarnessRecord

log = logging.getLogger(__name__)

#: Largest report read once decompressed; the shipped suites' reports are under 16 MiB.
MAX_REPORT_BYTES = 1 << 30

#: Columns of the per-kernel frame that identify a kernel, before its metrics.
KERNEL_IDS: tuple[str, ...] = (
    names.SUITE,
    names.CASE,
    names.VARIANT,
    names.KERNEL_INDEX,
    names.KERNEL,
    names.DEVICE_NAME,
)


def spread_columns() -> tuple[str, ...]:
    """The spread columns: one per source metric of a counted quantity."""
    return tuple(dict.fromkeys(names.spread_column(s) for q in quantities.counted() for s in q.sources))


def kernel_columns() -> tuple[str, ...]:
    """The per-kernel frame's columns: :data:`KERNEL_IDS`, every metric ncu is asked for, named verbatim, then each
    counted metric's spread over the profiled passes (:func:`spread_columns`: NaN after one pass)."""
    return (*KERNEL_IDS, *quantities.ncu_metrics(), *spread_columns())


def load_reader(ncu: str | None = None) -> ModuleType:
    """Import ``ncu_report``: the PyPI package, else the ``extras/python`` copy beside the ``ncu`` found.

    Raises:
        ReportError: neither is available; says how to get one.
    """
    try:
        return importlib.import_module("ncu_report")
    except ImportError:
        pass
    if ncu is not None:
        extras = Path(ncu).resolve().parent / "extras" / "python"
        if (extras / "ncu_report.py").exists():
            sys.path.insert(0, str(extras))
            try:
                return importlib.import_module("ncu_report")
            except ImportError as exc:
                raise ReportError(f"cannot import ncu_report from {extras}: {exc}") from None
    raise ReportError(
        "NVIDIA's report reader is not installed: `pip install ncu-report` (it is a dependency of "
        "fuseci), or put Nsight Compute on PATH so that its extras/python copy is found"
    )


def reader_version() -> str:
    """Version of the installed ``ncu-report`` package, or ``unknown`` (ncu's extras copy)."""
    try:
        return importlib.metadata.version("ncu-report")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@contextmanager
def _plain_report(path: Path) -> Iterator[Path]:
    """Yield a path to an uncompressed report, decompressing ``.xz`` into a temporary file (up to
    :data:`MAX_REPORT_BYTES`); only a regular file is read (a FIFO would never end)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise ReportError(f"{path}: report not found") from None
    except OSError as exc:
        raise ReportError(f"{path}: cannot read the report: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        what = "a directory" if stat.S_ISDIR(mode) else "not a regular file (a device, FIFO or socket)"
        raise ReportError(f"{path}: is {what}; pass the .ncu-rep (or .ncu-rep.xz) file `fuseci run` wrote")
    if path.suffix != ".xz":
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="fuseci-") as tmp:
        plain = Path(tmp) / path.name.removesuffix(".xz")
        try:
            with lzma.open(path, "rb") as src, plain.open("wb") as dst:
                left = MAX_REPORT_BYTES + 1
                while left > 0 and (chunk := src.read(min(1 << 20, left))):
                    dst.write(chunk)
                    left -= len(chunk)
        except (lzma.LZMAError, EOFError, OSError) as exc:
            raise ReportError(f"{path}: cannot decompress ({exc}); is it a complete .xz file?") from None
        if left <= 0:
            raise ReportError(
                f"{path}: decompresses to over {MAX_REPORT_BYTES >> 30} GiB, more than any report of fuseci's; "
                "is it a report `fuseci run` wrote?"
            )
        yield plain


def _metric(action: Any, name: str) -> float:
    metric = action.metric_by_name(name)
    return math.nan if metric is None else float(metric.as_double())


def _string(action: Any, name: str) -> str:
    metric = action.metric_by_name(name)
    return "" if metric is None else str(metric.as_string())


def _stack(action: Any) -> tuple[str, ...]:
    """Every push/pop range enclosing a kernel, outermost first, domain by domain."""
    state = action.nvtx_state()
    if state is None:
        return ()
    return tuple(str(n) for d in state.domains() for n in state.domain_by_id(d).push_pop_ranges())


#: The metrics of a kernel a ledger reads (:func:`fuseci.records.fusion.kernel_row`).
LEDGER_METRICS = (*(m for ms in (*METRICS.values(), *REQUESTED.values()) for m in ms), *SHAPE)


def read_report(
    path: Path,
    ledger_rows: dict[tuple[str, str], list[KernelRow]] | None = None,
    repeats: Mapping[tuple[str, str], Mapping[int, Repeats]] | None = None,
    *,
    ncu: str | None = None,
) -> pd.DataFrame:
    """Read every kernel inside a ``fuseci:`` range into the per-kernel frame, in launch order within each (case,
    variant), a variant profiled more than once keeping its first pass (:func:`fold_passes`).

    Args:
        path: The report.
        ledger_rows: For each ``(case, variant)`` key it holds, the kernels of the variant's first
            pass are appended to its list as a ledger reads them (from :data:`LEDGER_METRICS`).
        repeats: For each ``(case, variant)`` key, by pass, the launches ncu left out: each is
            counted with a copy of the kernels of the launch it repeats (:mod:`.repeats`).
        ncu: The ncu executable whose copy of the reader is taken (:func:`load_reader`).

    Raises:
        ReportError: the file is missing, truncated or not fuseci's, the reader is absent, or a ledger kernel lacks a
            metric its ledger reads.
    """
    reader = load_reader(ncu)
    rows: list[dict[str, Any]] = []
    held: dict[tuple[str, str, str, int], list[repeated.Kernel]] = {}
    metrics = quantities.ncu_metrics()
    skipped = 0
    with _plain_report(path) as plain:
        try:
            ctx = reader.load_report(str(plain))
        except Exception as exc:  # the reader raises bare RuntimeErrors with its own text
            raise ReportError(
                f"{path}: ncu_report cannot read it ({exc}); is it a complete .ncu-rep?", by_reader=True
            ) from None
        if ctx is None:
            raise ReportError(f"{path}: ncu_report cannot read it; is it a complete .ncu-rep?", by_reader=True)
        for r in range(ctx.num_ranges()):
            rng = ctx.range_by_idx(r)
            for a in range(rng.num_actions()):
                action = rng.action_by_idx(a)
                # CuPy opens ranges of its own (in other domains, or nested inside ours): look
                # through every domain's whole stack rather than at the innermost range.
                stack = _stack(action)
                ids = next(filter(None, map(names.parse_range, stack)), None)
                if ids is None:
                    skipped += 1
                    continue
                row: dict[str, Any] = {
                    names.SUITE: ids[0],
                    names.CASE: ids[1],
                    names.VARIANT: ids[2],
                    names.KERNEL: action.name(),
                    names.DEVICE_NAME: _string(action, names.DEVICE_NAME),
                    names.PASS: ids[3],
                }
                row.update({m: _metric(action, m) for m in metrics})
                if ledger_rows is not None and ids[3] == 0 and (ids[1], ids[2]) in ledger_rows:
                    row.update({m: _metric(action, m) for m in LEDGER_METRICS if m not in row})
                held.setdefault(ids, []).append(repeated.Kernel(row, stack))
    if not held and not skipped:
        raise ReportError(
            f"{path}: it holds no profiled kernel; is it a complete report written by `fuseci run`?", by_reader=True
        )
    for ids, kernels in held.items():
        left_out = (repeats or {}).get((ids[1], ids[2]), {}).get(ids[3])
        if left_out:
            kernels = repeated.expand(kernels, left_out)
        wanted = None if ledger_rows is None or ids[3] != 0 else ledger_rows.get((ids[1], ids[2]))
        for index, k in enumerate(kernels):
            k.row[names.KERNEL_INDEX] = index
            rows.append(k.row)
            if wanted is not None:
                try:
                    wanted.append(kernel_row(len(wanted), k.row[names.KERNEL], k.stack, k.row, k.repeat))
                except ValueError as exc:
                    raise ReportError(
                        f"{path}: case {ids[1]}, variant {ids[2]}, kernel {index} ({k.row[names.KERNEL]}): {exc}; "
                        "profile the suite again"
                    ) from None
    if skipped:
        # fuseci's NVTX filter profiles only kernels inside its ranges: an unattributed kernel
        # means a truncated file or a report fuseci did not write.
        raise ReportError(
            f"{path}: {skipped} kernel(s) lie outside 'fuseci:' NVTX ranges; the report is truncated "
            "or was not written by `fuseci run`: profile the suite again"
        )
    return fold_passes(pd.DataFrame.from_records(rows, columns=[*kernel_columns(), names.PASS]))


def fold_passes(frame: pd.DataFrame) -> pd.DataFrame:
    """The first pass's rows of a report's rows (with a :data:`~fuseci.config.names.PASS` column), each kernel's
    spread columns holding each counted metric's max - min over its variant's passes; NaN where the variant was
    profiled once, or where a repeat launched other kernels than the first pass."""
    first = frame[frame[names.PASS] == 0].drop(columns=[names.PASS]).reset_index(drop=True)
    first = first.reindex(columns=list(kernel_columns()))
    repeats = frame[frame[names.PASS] > 0]
    if repeats.empty:
        return first
    sources = list(dict.fromkeys(s for q in quantities.counted() for s in q.sources))
    key = [names.SUITE, names.CASE, names.VARIANT]
    passes = {k: g.sort_values(names.KERNEL_INDEX) for k, g in repeats.groupby([*key, names.PASS], sort=False)}
    for (suite, case, variant), rows in first.groupby(key, sort=False):
        rows = rows.sort_values(names.KERNEL_INDEX)
        again = [g for (s, c, v, _), g in passes.items() if (s, c, v) == (suite, case, variant)]
        if not again:
            continue
        if any(list(g[names.KERNEL]) != list(rows[names.KERNEL]) for g in again):
            log.info("%s/%s: a profiled pass launched other kernels than the first: no spread", case, variant)
            continue
        for m in sources:
            values = np.vstack([rows[m].to_numpy(dtype=float), *(g[m].to_numpy(dtype=float) for g in again)])
            first.loc[rows.index, names.spread_column(m)] = values.max(axis=0) - values.min(axis=0)
    return first


#: A report's first bytes: the magic number, then length-prefixed protocol-buffer messages (ncu's
#: ``extras/FileFormat``): the file header, then the first block header.
_MAGIC = b"NVR\x00"
#: Bytes read for the headers.
_HEADER_BYTES = 1 << 16
#: The block header's session details, and in them the time the session started (seconds since
#: the epoch).
_SESSION_FIELD = 3
_CREATED_FIELD = 2


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """A protocol-buffer varint at ``at``: (value, the offset after it); ValueError over 64 bits."""
    value = shift = 0
    while shift < 64:
        byte = data[at]  # IndexError past the end: the caller's ValueError
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
    raise ValueError("varint over 64 bits")


def _fields(message: bytes) -> Iterator[tuple[int, int | bytes]]:
    """The (field number, value) pairs of a protocol-buffer message of varints and length-delimited
    bytes; ValueError for any other message."""
    at = 0
    while at < len(message):
        key, at = _varint(message, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(message, at)
            yield number, value
        elif wire == 2:
            size, at = _varint(message, at)
            if at + size > len(message):
                raise ValueError("field past the end of its message")
            yield number, message[at : at + size]
            at += size
        else:
            raise ValueError(f"wire type {wire}")


def _message(data: bytes, at: int) -> tuple[bytes, int]:
    size = int.from_bytes(data[at : at + 4], "little")
    if at + 4 + size > len(data):
        raise ValueError("message past the headers read")
    return data[at + 4 : at + 4 + size], at + 4 + size


def session_started(path: Path) -> datetime | None:
    """When ncu started the session that wrote the report (``.ncu-rep`` or ``.ncu-rep.xz``), from its header without
    NVIDIA's reader; None when unreadable or holding no such time (another format, a damaged header, a time before
    2000 or in the future). Never raises."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would never end
            return None
        with lzma.open(path, "rb") if path.suffix == ".xz" else path.open("rb") as f:
            head = f.read(_HEADER_BYTES)
        if not head.startswith(_MAGIC):
            return None
        _, at = _message(head, len(_MAGIC))  # the file header
        block, _ = _message(head, at)
        session = next((v for n, v in _fields(block) if n == _SESSION_FIELD and isinstance(v, bytes)), None)
        seconds = next((v for n, v in _fields(session or b"") if n == _CREATED_FIELD and isinstance(v, int)), None)
    except (OSError, lzma.LZMAError, EOFError, ValueError, IndexError) as exc:
        log.info("%s: no session time in its header: %s", path, exc)
        return None
    if seconds is None:
        return None
    started = datetime.fromtimestamp(min(seconds, 2**40), tz=timezone.utc)
    if not datetime(2000, 1, 1, tzinfo=timezone.utc) <= started <= datetime.now(timezone.utc) + timedelta(days=1):
        return None
    return started


def read_report_empty() -> pd.DataFrame:
    """The per-kernel frame of a run in which nothing was profiled."""
    return pd.DataFrame.from_records([], columns=list(kernel_columns()))


#: Pairs named in a message before "and N more".
_SHOWN = 4


def _listed(items: list[str]) -> str:
    more = f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else ""
    return ", ".join(items[:_SHOWN]) + more


def mismatch(kernels: pd.DataFrame, record: HarnessRecord) -> str:
    """What makes a report's per-kernel frame and a harness record not one run's, or ``""``: every kernel must be of
    the record's suite, on its GPU (where ncu recorded one) and in a variant it ran; unless the run was stopped, each
    variant it ran in a case that checked right must have kernels."""
    suites = sorted(set(kernels[names.SUITE]) - {record.suite})
    if suites:
        return f"the report holds suite(s) {_listed(suites)}, the record suite {record.suite!r}"
    devices = sorted({d for d in kernels[names.DEVICE_NAME] if isinstance(d, str) and d})
    if len(devices) > 1:
        return f"the report holds kernels of several GPUs ({_listed([repr(d[:100]) for d in devices])})"
    gpu = record.env.get("gpu_name")
    if devices and gpu != devices[0]:
        return f"the report was recorded on {devices[0][:100]!r}, the record on {str(gpu)[:100]!r}"
    ran = {(cid, vid) for cid, case in record.cases.items() for vid in case.measured}
    seen = set(zip(kernels[names.CASE], kernels[names.VARIANT], strict=True))
    stray = sorted(f"{c}/{v}" for c, v in seen - ran)
    if stray:
        return f"the report has kernels of {_listed(stray)}, which the record did not run in their NVTX ranges"
    if not record.interrupted:
        missing = sorted(f"{c}/{v}" for c, v in ran - seen if record.cases[c].ok)
        if missing:
            return f"the record ran {_listed(missing)}, of which the report has no kernels"
    return ""
