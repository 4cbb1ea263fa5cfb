"""Baselines: versioned, deterministic JSON per GPU and suite.

Laid out as ``baselines/<gpu-slug>/<suite>.json``. Each holds the environment fingerprint it
was recorded under and, per case and variant, the aggregated quantities and kernel inventory.
Gains are derived from those when comparing, so the file has one source of truth. Files are
written with sorted keys, fixed rounding and a trailing newline so that diffs review well, and
only by ``fuseci update-baselines``, atomically.

Two updates of one file (two CI jobs, or a person and CI on a shared checkout) are serialised
by :func:`locked`: an advisory lock on the card's directory ``<gpu-slug>/`` itself, held from
reading the old baseline to renaming the new one into place (milliseconds; measuring happens
before), so the second update compares with, and builds on, what the first wrote. It waits at
most :data:`LOCK_TIMEOUT_S`. Locking the directory creates no file, so nothing is left in the
user's tree, however an update ends; the temporary file of an update that was killed between
writing and renaming (``.<suite>.json.XXXXXXXX.tmp``) is removed by the next update of that
file, under the lock. Readers (``fuseci run``) take no lock: the atomic rename shows them the
old file or the new one. Locking is POSIX-only (see :mod:`fuseci.store.atomic`).

A baseline file, or a card's directory, that is a symbolic link is read through the link but
never written through: replacing the file atomically would turn the link into a file, and
writing through either could change a file outside ``<gpu-slug>/<suite>.json`` (another card's or
suite's baseline: ``nvidia-h200 -> nvidia-h100-80gb-hbm3``). ``update-baselines`` says so and
leaves it alone; a card directory that is a link is refused before the old baseline is read. The
write itself happens in the directory opened without following a link
(:func:`~fuseci.store.atomic.atomic_write_text` with ``links=False``), so a link put in place
during an update changes nothing either. The root (``--baselines``) may be a link: the user
named it.

Format history:
    1: first version.
    1 (still): a kernel may carry a fifth number, its shared memory per block in bytes, when it
       has any; four numbers mean none (or unknown).
    2: a kernel may carry a sixth member after its shared memory (then always written): an object
       of its counted quantities (``counts``: bytes the SMs asked of memory, instructions) and how
       far each moved over the profiled passes the baseline was recorded with (``spread``, absent
       after one pass). A version-1 file reads as it is: its kernels have neither.
"""

from __future__ import annotations

import errno
import json
import math
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from fuseci import validation as v
from fuseci.config.names import gpu_slug
from fuseci.errors import BaselineError
from fuseci.frames.inventory import Counts, KernelLaunch
from fuseci.judge.baseline import Baseline, VariantBaseline
from fuseci.store.atomic import LockTimeout, atomic_write_text, exclusive_lock, sweep_temporaries
from fuseci.store.versioned import DocumentFormat

_FIX = "restore it from version control (git checkout -- FILE) or re-record it with `fuseci update-baselines`"

FORMAT = DocumentFormat(
    what="baseline", version=2, fix=_FIX, error=BaselineError, upgrades={1: lambda doc: {**doc, "format_version": 2}}
)


class KernelCounts(v.Model):
    """A kernel's counted quantities and how far they moved, by quantity name."""

    counts: Counts = Field(default_factory=dict)
    spread: Counts = Field(default_factory=dict)


def _kernel_row(value: Any) -> Any:
    """Four numbers mean no shared memory (or unknown): the fifth is 0; a sixth member holds the
    kernel's counts (none: empty)."""
    if not isinstance(value, list) or not 4 <= len(value) <= 6:
        raise ValueError(f"expected a list of 4 to 6, got {v.shown(value)}")
    if len(value) == 4:
        return (*value, 0, {})
    return (*value, {}) if len(value) == 5 else tuple(value)


#: A kernel: ``[name, grid, block, registers]``, the shared memory per block when there is any,
#: and its counts (:class:`KernelCounts`) when the baseline holds them.
Kernel = Annotated[tuple[v.Name, v.Count, v.Count, v.Count, v.Count, KernelCounts], BeforeValidator(_kernel_row)]


class VariantDoc(v.OpenModel):
    """What one variant measured (unknown keys are left out)."""

    values: Annotated[dict[v.QuantityName, v.Amount | None], Field(max_length=1000)]
    """By quantity; null: not measured (NaN)."""
    kernels: Annotated[v.Items[Kernel], Field(max_length=100_000)]
    """The kernel inventory, in launch order."""


class BaselineDoc(v.OpenModel):
    """What a baseline holds (after ``format_version``, checked by :data:`FORMAT`)."""

    suite: v.Id
    env: v.Env
    cases: Annotated[dict[v.Id, Annotated[dict[v.Id, VariantDoc], Field(max_length=1000)]], Field(max_length=10_000)]
    """case id → variant id → measurements."""
    fuseci_version: Annotated[str, Field(max_length=100)] = "?"


#: How long ``update-baselines`` waits for another update of the same file (seconds).
LOCK_TIMEOUT_S = 600.0


def to_json(baseline: Baseline) -> dict[str, Any]:
    """The file's object without ``format_version`` (values rounded, ready for sorted-key JSON)."""
    return {
        "fuseci_version": baseline.fuseci_version,
        "suite": baseline.suite,
        "env": dict(baseline.env),
        "cases": {
            cid: {
                vid: {
                    "values": {q: _round(v) for q, v in vb.values.items()},
                    "kernels": [_kernel_json(k) for k in vb.kernels],
                }
                for vid, vb in variants.items()
            }
            for cid, variants in baseline.cases.items()
        },
    }


def _kernel_json(k: KernelLaunch) -> list[Any]:
    """``[name, grid, block, registers]``, the shared memory per block when there is any, and the
    kernel's counts when it has them (the shared memory then always)."""
    row: list[Any] = [k.name, k.grid, k.block, k.registers]
    if k.counts or k.spread:
        counts: dict[str, Any] = {"counts": {q: _round(x) for q, x in sorted(k.counts.items())}}
        if k.spread:
            counts["spread"] = {q: _round(x) for q, x in sorted(k.spread.items())}
        return [*row, k.shared_mem, counts]
    return [*row, k.shared_mem] if k.shared_mem else row


def from_json(data: Any, path: Path | str) -> Baseline:
    """Parse (and upgrade) a baseline file's contents.

    Raises:
        BaselineError: malformed, or written by a newer fuseci.
    """
    try:
        doc = v.validate(BaselineDoc, FORMAT.check(data, path))
    except v.Invalid as exc:
        raise FORMAT.invalid(path, exc) from None
    cases = {
        cid: {
            vid: VariantBaseline(
                values={q: math.nan if x is None else x for q, x in vb.values.items()},
                kernels=tuple(
                    KernelLaunch(*k[:5], counts=dict(k[5].counts), spread=dict(k[5].spread)) for k in vb.kernels
                ),
            )
            for vid, vb in variants.items()
        }
        for cid, variants in doc.cases.items()
    }
    return Baseline(suite=doc.suite, env=doc.env, cases=cases, fuseci_version=doc.fuseci_version)


def _round(value: float) -> float | int | None:
    if not math.isfinite(value):  # not measured, or beyond measuring (a rate over a zero-length time)
        return None
    if value == int(value) and abs(value) < 2**53:
        return int(value)
    return float(f"{value:.6g}")


def baseline_path(root: Path, gpu_name: str, suite: str) -> Path:
    """``<root>/<gpu-slug>/<suite>.json``."""
    return root / gpu_slug(gpu_name) / f"{suite}.json"


def kept_in(root: Path) -> list[Path]:
    """Every baseline file under the baseline root ``root`` (``<root>/<gpu-slug>/<suite>.json``),
    of every card and suite: no report may replace one (:func:`fuseci.store.atomic.check_outputs`)."""
    try:
        return sorted(root.glob("*/*.json"))
    except OSError:  # unreadable: nothing known to keep
        return []


def load_baseline(path: Path) -> Baseline | None:
    """Read a baseline; None when the file does not exist.

    Raises:
        BaselineError: the file exists but is unreadable, corrupt, or from a newer fuseci.
    """
    try:
        data = FORMAT.load(path)
    except FileNotFoundError:
        return None
    return from_json(data, path)


def dumps(baseline: Baseline) -> str:
    """The exact text written for a baseline."""
    return FORMAT.dumps(to_json(baseline))


def save_baseline(baseline: Baseline, path: Path) -> None:
    """Write atomically (temporary file in the same directory, then a rename).

    Raises:
        BaselineError: ``path`` or its directory is a symbolic link, or the file cannot be written (read-only
            directory, full disk); the old file stays as it was, byte for byte, and no
            temporary file remains.
    """
    _refuse_linked_card(path)
    if path.is_symlink():
        raise BaselineError(
            f"{path}: is a symbolic link (to {os.readlink(path)}); update-baselines replaces baseline files "
            "atomically and does not write through links, which could change another card's or suite's "
            f"baseline: replace the link with a copy of its target (with GNU cp: cp --remove-destination "
            f'"$(readlink -f {path})" {path}) and run again'
        )
    try:
        atomic_write_text(path, dumps(baseline), links=False)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # made a link since the checks above
            raise BaselineError(
                f"{path}: {exc.strerror}; update-baselines does not write through links: nothing was written"
            ) from None
        raise BaselineError(
            f"{path}: cannot write baseline: {_why(exc, path.parent)}; the old file is unchanged"
        ) from None


def _refuse_linked_card(path: Path) -> None:
    """Refuse a card directory that is a symbolic link: an update through it would replace the
    baseline of the card it points to.

    Raises:
        BaselineError: ``path``'s directory is a symbolic link.
    """
    card = path.parent
    if card.is_symlink():
        target = os.readlink(card)
        raise BaselineError(
            f"{card}: is a symbolic link (to {target}); update-baselines writes a card's baselines only into its own "
            "directory, never through a link, which could replace another card's baseline: replace the link with a "
            f"copy of its target (rm {card} && cp -r {os.path.join(card.parent, target)} {card}) and run again"
        )


def lock_path(path: Path) -> Path:
    """What the update lock of a baseline locks: its card's directory, ``<root>/<gpu-slug>/``."""
    return path.parent


@contextmanager
def locked(path: Path, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the update lock of the baseline file ``path`` for the block (see the module docstring),
    and remove the temporary files an update that was killed left beside it.

    Creates the baseline's directory if needed.

    Raises:
        BaselineError: another update held the lock for ``timeout_s``, the directory cannot be
            created or locked, or it is a symbolic link (nothing is read or written then).
    """
    lock = lock_path(path)
    _refuse_linked_card(path)
    stack = ExitStack()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        stack.enter_context(exclusive_lock(lock, timeout_s))
    except LockTimeout as exc:
        raise BaselineError(
            f"{path}: gave up after {exc.waited_s:g} s waiting for the update lock of {exc.lock}, held by "
            f"{exc.holder}: another `fuseci update-baselines` is updating this card's baselines; let it finish "
            "and run again (the lock goes when that process exits)"
        ) from None
    except OSError as exc:
        raise BaselineError(f"{path}: cannot lock {lock} for update: {_why(exc, path.parent)}") from None
    with stack:
        sweep_temporaries(path, 0)  # every writer of this file holds this lock: none is writing now
        yield


def _why(exc: OSError, directory: Path) -> str:
    """An OSError of a write into ``directory``, with what to do about it."""
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return (
            f"the directory {directory} is not writable ({exc}); update-baselines writes a temporary file "
            "there: make it writable, or pass --baselines with a writable copy of the tree"
        )
    if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return f"{exc}; free some space on that file system and run again"
    return str(exc)


def normalized(baseline: Baseline) -> Baseline:
    """The baseline as it reads back from its file (values rounded), for exact comparisons."""
    return from_json(json.loads(FORMAT.text(to_json(baseline))), "<memory>")
