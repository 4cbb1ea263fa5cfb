"""Baselines on disk: ``baselines/<gpu-slug>/<suite>.json``, written only by ``fuseci update-baselines``,
atomically and under a lock on the card's directory (:func:`locked`). A baseline file or card directory that is a
symbolic link is read through, never written through (that could change another card's or suite's baseline). The
format is :mod:`fuseci.judge.baseline`'s."""

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

#: How long ``update-baselines`` waits for another update of the same card (seconds).
LOCK_TIMEOUT_S = 600.0


def baseline_path(root: Path, gpu_name: str, suite: str) -> Path:
    """``<root>/<gpu-slug>/<suite>.json``."""
    return root / gpu_slug(gpu_name) / f"{suite}.json"


def kept_in(root: Path) -> list[Path]:
    """Every baseline file under the baseline root ``root``, of every card and suite."""
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
        BaselineError: ``path`` or its directory is a symbolic link, or it cannot be written (the old file stays).
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
    """Refuse a card directory that is a symbolic link (an update would replace its target's baseline)."""
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
    """Hold the update lock of the baseline file ``path`` for the block (an advisory lock on its card's directory,
    created if needed, leaving no file behind), and remove the temporary files a killed update left beside it.
    Readers take no lock: the atomic rename shows them the old file or the new one.

    Raises:
        BaselineError: another update held it for ``timeout_s``, or the directory cannot be made, locked, or is a link.
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
