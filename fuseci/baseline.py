"""Baselines: versioned, deterministic JSON per GPU and suite.

Laid out as ``baselines/<gpu-slug>/<suite>.json``. Each holds the environment fingerprint it
was recorded under and, per case and variant, the aggregated quantities and kernel inventory.
Gains are derived from those when comparing, so the file has one source of truth. Files are
written with sorted keys, fixed rounding and a trailing newline so that diffs review well, and
only by ``fuseci update-baselines``, atomically.

Two updates of one file (two CI jobs, or a person and CI on a shared checkout) are serialised
by :func:`locked`: an advisory lock on ``<gpu-slug>/.<suite>.json.lock`` held from reading the
old baseline to renaming the new one into place, so the second update compares with, and
builds on, what the first wrote. It waits at most :data:`LOCK_TIMEOUT_S`. The lock file stays
behind (it is ignored by git) and never blocks once its holder has exited. Readers (``fuseci
run``) take no lock: the atomic rename shows them the old file or the new one. Locking is
POSIX-only (see :mod:`fuseci.atomic`).

A baseline file that is a symbolic link is read through the link but never written: replacing
it atomically would turn the link into a file, and writing through it could change a file
outside ``<gpu-slug>/<suite>.json`` (another card's or suite's baseline). ``update-baselines``
says so and leaves it alone. Linked *directories* are followed like any directory.

Format history:
    1: first version.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fuseci import __version__
from fuseci.atomic import LockTimeout, atomic_write_text, exclusive_lock
from fuseci.errors import BaselineError
from fuseci.metrics import ENV_FIELDS, KernelLaunch, SuiteResults, inventory
from fuseci.record import CaseStatus

FORMAT_VERSION = 1

#: How long ``update-baselines`` waits for another update of the same file (seconds).
LOCK_TIMEOUT_S = 600.0

#: Upgrade functions: ``_UPGRADES[n]`` turns a format-n dict into a format-(n+1) dict.
_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


@dataclass(frozen=True, slots=True)
class VariantBaseline:
    """What one variant measured when the baseline was recorded."""

    values: Mapping[str, float]
    """Aggregated quantities by name (see :data:`fuseci.metrics.VARIANT_QUANTITIES`)."""
    kernels: tuple[KernelLaunch, ...]
    """Kernel inventory in launch order."""


@dataclass(frozen=True, slots=True)
class Baseline:
    """One suite's baseline on one GPU."""

    suite: str
    """Suite id."""
    env: Mapping[str, Any]
    """Environment fingerprint it was recorded under."""
    cases: Mapping[str, Mapping[str, VariantBaseline]]
    """case id → variant id → measurements."""
    fuseci_version: str = __version__
    """fuseci version that wrote it."""

    def to_json(self) -> dict[str, Any]:
        """The file's dict (rounded, ready for sorted-key JSON)."""
        return {
            "format_version": FORMAT_VERSION,
            "fuseci_version": self.fuseci_version,
            "suite": self.suite,
            "env": dict(self.env),
            "cases": {
                cid: {
                    vid: {
                        "values": {q: _round(v) for q, v in vb.values.items()},
                        "kernels": [[k.name, k.grid, k.block, k.registers] for k in vb.kernels],
                    }
                    for vid, vb in variants.items()
                }
                for cid, variants in self.cases.items()
            },
        }

    @classmethod
    def from_json(cls, data: Any, path: Path) -> Baseline:
        """Parse (and upgrade) a baseline file's contents.

        Raises:
            BaselineError: malformed, or written by a newer fuseci.
        """
        if not isinstance(data, dict) or "format_version" not in data:
            raise BaselineError(f"{path}: not a fuseci baseline (no format_version); {_FIX}")
        version = data["format_version"]
        if not isinstance(version, int) or version < 1:
            raise BaselineError(f"{path}: invalid format_version {version!r}; {_FIX}")
        if version > FORMAT_VERSION:
            raise BaselineError(
                f"{path}: baseline format {version} was written by a newer fuseci "
                f"({data.get('fuseci_version', '?')}); this is fuseci {__version__}: upgrade fuseci"
            )
        while version < FORMAT_VERSION:
            data = _UPGRADES[version](data)
            version += 1
        try:
            cases = {
                str(cid): {
                    str(vid): VariantBaseline(
                        values={str(q): math.nan if v is None else float(v) for q, v in vb["values"].items()},
                        kernels=tuple(KernelLaunch(str(k[0]), int(k[1]), int(k[2]), int(k[3])) for k in vb["kernels"]),
                    )
                    for vid, vb in variants.items()
                }
                for cid, variants in data["cases"].items()
            }
            return cls(
                suite=str(data["suite"]),
                env=dict(data["env"]),
                cases=cases,
                fuseci_version=str(data.get("fuseci_version", "?")),
            )
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise BaselineError(f"{path}: malformed baseline ({type(exc).__name__}: {exc}); {_FIX}") from None


_FIX = "restore it from version control (git checkout -- FILE) or re-record it with `fuseci update-baselines`"


def _round(value: float) -> float | int | None:
    if math.isnan(value):
        return None
    if value == int(value) and abs(value) < 2**53:
        return int(value)
    return float(f"{value:.6g}")


def gpu_slug(gpu_name: str) -> str:
    """``NVIDIA H100 80GB HBM3`` → ``nvidia-h100-80gb-hbm3``."""
    slug = re.sub(r"[^a-z0-9]+", "-", gpu_name.lower()).strip("-")
    return slug or "unknown-gpu"


def baseline_path(root: Path, gpu_name: str, suite: str) -> Path:
    """``<root>/<gpu-slug>/<suite>.json``."""
    return root / gpu_slug(gpu_name) / f"{suite}.json"


def load_baseline(path: Path) -> Baseline | None:
    """Read a baseline; None when the file does not exist.

    Raises:
        BaselineError: the file exists but is unreadable, corrupt, or from a newer fuseci.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"{path}: cannot read baseline: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{path}:{exc.lineno}:{exc.colno}: corrupt baseline JSON ({exc.msg}); {_FIX}") from None
    return Baseline.from_json(data, path)


def dumps(baseline: Baseline) -> str:
    """The exact text written for a baseline."""
    return json.dumps(baseline.to_json(), indent=2, sort_keys=True, allow_nan=False) + "\n"


def save_baseline(baseline: Baseline, path: Path) -> None:
    """Write atomically (temporary file in the same directory, then a rename).

    Raises:
        BaselineError: ``path`` is a symbolic link, or the file cannot be written (read-only
            directory, full disk); the old file stays as it was, byte for byte, and no
            temporary file remains.
    """
    if path.is_symlink():
        raise BaselineError(
            f"{path}: is a symbolic link (to {os.readlink(path)}); update-baselines replaces baseline files "
            "atomically and does not write through links, which could change another card's or suite's "
            f"baseline: replace the link with a copy of its target (with GNU cp: cp --remove-destination "
            f'"$(readlink -f {path})" {path}) and run again'
        )
    try:
        atomic_write_text(path, dumps(baseline))
    except OSError as exc:
        raise BaselineError(
            f"{path}: cannot write baseline: {_why(exc, path.parent)}; the old file is unchanged"
        ) from None


def lock_path(path: Path) -> Path:
    """The lock file of a baseline: ``<gpu-slug>/.<suite>.json.lock``."""
    return path.with_name(f".{path.name}.lock")


@contextmanager
def locked(path: Path, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the update lock of the baseline file ``path`` for the block (see the module docstring).

    Creates the baseline's directory if needed.

    Raises:
        BaselineError: another update held the lock for ``timeout_s``, or the lock file cannot be
            created (read-only baseline directory).
    """
    lock = lock_path(path)
    stack = ExitStack()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        stack.enter_context(exclusive_lock(lock, timeout_s))
    except LockTimeout as exc:
        raise BaselineError(
            f"{path}: gave up after {exc.waited_s:g} s waiting for the lock {lock}, held by {exc.holder}: "
            "another `fuseci update-baselines` is updating this baseline; let it finish and run again "
            "(the lock goes when that process exits; the lock file itself can stay)"
        ) from None
    except OSError as exc:
        raise BaselineError(f"{path}: cannot lock for update ({lock}): {_why(exc, path.parent)}") from None
    with stack:
        yield


def _why(exc: OSError, directory: Path) -> str:
    """An OSError of a write into ``directory``, with what to do about it."""
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return (
            f"the directory {directory} is not writable ({exc}); update-baselines writes a temporary file "
            "and a lock file there: make it writable, or pass --baselines with a writable copy of the tree"
        )
    if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return f"{exc}; free some space on that file system and run again"
    return str(exc)


def from_results(results: SuiteResults, cases: set[str]) -> Baseline:
    """A baseline holding those of ``cases`` that the harness ran ok (measured, right results).

    A case that errored may have left some variants' kernels in the report; those are never a
    baseline, and a wrong case has nothing measured.
    """
    ok = {cid for cid, c in results.record.cases.items() if c.status == CaseStatus.OK}
    out: dict[str, dict[str, VariantBaseline]] = {}
    for case in sorted(cases & ok):
        variants: dict[str, VariantBaseline] = {}
        for vid in results.variants[results.variants["case"] == case]["variant"]:
            values = results.variant_values(case, vid)
            if values is not None:  # quantities not measured (not timed, say) are left out
                known = {q: v for q, v in values.items() if not math.isnan(v)}
                variants[vid] = VariantBaseline(values=known, kernels=inventory(results.kernels, case, vid))
        out[case] = variants
    env = {k: results.env.get(k) for k in ENV_FIELDS}
    return Baseline(suite=results.suite, env=env, cases=out)


def normalized(baseline: Baseline) -> Baseline:
    """The baseline as it reads back from its file (values rounded), for exact comparisons."""
    return Baseline.from_json(json.loads(dumps(baseline)), Path("<memory>"))
