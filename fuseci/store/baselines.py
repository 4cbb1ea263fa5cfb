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
old file or the new one. Locking is POSIX-only (see :mod:`fuseci.files.locks`).

A baseline file, or a card's directory, that is a symbolic link is read through the link but
never written through: replacing the file atomically would turn the link into a file, and
writing through either could change a file outside ``<gpu-slug>/<suite>.json`` (another card's or
suite's baseline: ``nvidia-h200 -> nvidia-h100-80gb-hbm3``). ``update-baselines`` says so and
leaves it alone; a card directory that is a link is refused before the old baseline is read. The
write itself happens in the directory opened without following a link
(:func:`~fuseci.files.atomic.atomic_write_text` with ``links=False``), so a link put in place
during an update changes nothing either. The root (``--baselines``) may be a link: the user
named it.

The format (its history, its declaration, how it reads and writes) is
:mod:`fuseci.judge.baseline`'s.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from fuseci.config.names import gpu_slug
from fuseci.errors import BaselineError
from fuseci.files.atomic import atomic_write_text, sweep_temporaries
from fuseci.files.locks import LockTimeout, exclusive_lock
from fuseci.judge.baseline import FORMAT, Baseline

#: How long ``update-baselines`` waits for another update of the same file (seconds).
LOCK_TIMEOUT_S = 600.0


def baseline_path(root: Path, gpu_name: str, suite: str) -> Path:
    """``<root>/<gpu-slug>/<suite>.json``."""
    return root / gpu_slug(gpu_name) / f"{suite}.json"


def kept_in(root: Path) -> list[Path]:
    """Every baseline file under the baseline root ``root`` (``<root>/<gpu-slug>/<suite>.json``),
    of every card and suite: no report may replace one (:func:`fuseci.files.outputs.check_outputs`)."""
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
    return Baseline.from_json(data, path)


def dumps(baseline: Baseline) -> str:
    """The exact text written for a baseline."""
    return FORMAT.dumps(baseline.to_json())


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
