"""Advisory locks for read-modify-write, a directory's or a lock file's: ``flock`` through the
filelock library (imported only when a lock is taken), with a waiter told who holds the lock."""

from __future__ import annotations

import errno
import functools
import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

log = logging.getLogger(__name__)


class LockTimeout(TimeoutError):
    """Another process held the lock for longer than the caller would wait."""

    def __init__(self, lock: Path, waited_s: float, holder: str) -> None:
        super().__init__(f"{lock}: still locked after {waited_s:g} s by {holder}")
        self.lock = lock
        """The locked directory (or, where directories cannot be locked, the lock file)."""
        self.waited_s = waited_s
        """How long the caller waited."""
        self.holder = holder
        """Who holds it, as far as can be told (or a placeholder)."""


#: The lock file used where a directory cannot be locked itself (NFS): see :func:`exclusive_lock`.
FALLBACK_LOCK = ".fuseci.lock"
_UNKNOWN_HOLDER = "another process (which one cannot be told here)"
#: Opening a lock file never follows a link, never waits on a FIFO put in its place.
_OPEN_EXISTING = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def _read_holder(lock: Path) -> str:
    """Who holds the lock file ``lock``, as its holder wrote it (:func:`_write_holder`)."""
    try:
        fd = os.open(lock, _OPEN_EXISTING)
        try:
            text = os.pread(fd, 1000, 0).decode("utf-8", "replace").strip()
        finally:
            os.close(fd)
    except OSError:
        text = ""
    return text or "a process that has not written its name into the lock file yet"


def _write_holder(fd: int) -> None:
    """Write who holds the lock into the lock file ``fd`` just locked."""
    since = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv and sys.argv[0] else "python"
    # Only informs a waiter's message, so a full disk must not stop the holder here.
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {since} ({command[:200]})\n".encode(), 0)
    except OSError as exc:
        log.debug("cannot record the lock holder: %s", exc)


def _directory_holder(fd: int) -> str:
    """Who holds the flock of a directory, from Linux's ``/proc/locks`` and the holder's ``cmdline``."""
    try:
        st = os.fstat(fd)
        key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            pids = [p[4] for p in (line.split() for line in fh) if len(p) > 5 and p[1] == "FLOCK" and p[5] == key]
        if not pids or not pids[0].isdigit() or pids[0] == "0":
            return _UNKNOWN_HOLDER
        with open(f"/proc/{pids[0]}/cmdline", "rb") as fh:
            argv = [a.decode("utf-8", "replace") for a in fh.read(2000).split(b"\0") if a]
    except (OSError, ValueError):
        return _UNKNOWN_HOLDER
    command = " ".join([Path(argv[0]).name, *argv[1:]]) if argv else "?"
    return f"pid {pids[0]} on {socket.gethostname()} ({command[:200]})"


def _wait_for(
    attempt: Callable[[], bool],
    what: Path,
    holder: Callable[[], str],
    timeout_s: float,
    poll_s: float,
    max_poll_s: float = 1.0,
    may_try: Callable[[], bool] | None = None,
) -> None:
    """Take a lock by ``attempt`` (one try, true once taken), polling every ``poll_s``, doubling up
    to ``max_poll_s``, for at most ``timeout_s``; with ``may_try``, only at a poll where it says yes."""
    deadline = time.monotonic() + timeout_s
    delay = poll_s
    waiting = False
    while not ((may_try is None or may_try()) and attempt()):
        left = deadline - time.monotonic()
        if left <= 0:
            raise LockTimeout(what, timeout_s, holder())
        if not waiting:  # a warning, so that a silent wait does not look like a hang
            log.warning("%s is held by %s; waiting up to %g s", what, holder(), timeout_s)
            waiting = True
        time.sleep(min(delay, left))
        delay = min(delay * 2, max(max_poll_s, poll_s))


#: What flock on a directory gives where the file system cannot lock one (NFS emulates flock with
#: POSIX record locks, which need a file open for writing).
_NO_DIRECTORY_LOCKS = {errno.EBADF, errno.ENOLCK, errno.EINVAL, errno.EOPNOTSUPP, getattr(errno, "ENOTSUP", -1)}


@contextmanager
def exclusive_lock(directory: Path, timeout_s: float, poll_s: float = 0.05) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``directory`` for the block: one holder at a time.

    The directory itself (it must exist and not be a link) is locked with ``flock``, so nothing is left
    in it; where it cannot be (NFS), the lock file :data:`FALLBACK_LOCK` in it is; off POSIX, nothing
    is (a warning). ``poll_s``: the first interval between attempts, doubling up to one second.

    Raises:
        LockTimeout: another process held the lock for ``timeout_s``.
        OSError: the directory (or, as a fallback, the lock file) cannot be opened or locked.
    """
    if sys.platform == "win32":
        log.warning("%s: not locked: locking is POSIX-only; concurrent updates are not serialised", directory)
        yield
        return
    from filelock import lock_descriptor, unlock_descriptor

    # Never through a link: the lock is this directory's, not the one a link points to.
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(directory, flags)
    try:
        try:
            _wait_for(
                lambda: lock_descriptor(fd, blocking=False), directory, lambda: _directory_holder(fd), timeout_s, poll_s
            )
        except OSError as exc:
            if exc.errno not in _NO_DIRECTORY_LOCKS:
                raise
        else:
            try:
                yield
            finally:
                unlock_descriptor(fd)
            return
    finally:
        os.close(fd)
    with file_lock(directory / FALLBACK_LOCK, timeout_s, poll_s):
        yield


@contextmanager
def file_lock(
    lock: Path,
    timeout_s: float,
    poll_s: float = 0.05,
    max_poll_s: float = 1.0,
    may_try: Callable[[], bool] | None = None,
) -> Iterator[None]:
    """Hold an exclusive advisory lock through the file ``lock`` (created in an existing directory, removed
    on release) for the block. A waiter tries every ``poll_s``, doubling up to ``max_poll_s``; with
    ``may_try``, only when it says yes. A file system without ``flock`` is refused.

    Raises:
        LockTimeout: another process held the lock for ``timeout_s``.
        OSError: the lock file cannot be created, opened or locked, or its directory is missing.
    """
    from filelock import FileLock, Timeout

    if not lock.parent.is_dir():  # filelock would create it, and leave it behind
        raise FileNotFoundError(errno.ENOENT, "no such directory", str(lock.parent))
    held = FileLock(lock, blocking=False, fallback_to_soft=False, on_acquired=_write_holder)

    def attempt() -> bool:
        try:
            held.acquire()
        except Timeout:
            return False
        return True

    _wait_for(attempt, lock, functools.partial(_read_holder, lock), timeout_s, poll_s, max_poll_s, may_try)
    try:
        yield
    finally:
        try:
            lock.unlink(missing_ok=True)  # while still holding it: a waiter on this file starts again
        finally:
            held.release()


def is_held(lock: Path) -> bool:
    """Whether another process holds the lock file ``lock`` (:func:`file_lock`) now; missing counts as not."""
    from filelock import lock_descriptor, unlock_descriptor

    try:
        fd = os.open(lock, _OPEN_EXISTING)
    except OSError:
        return False
    try:
        if not lock_descriptor(fd, blocking=False):
            return True
        unlock_descriptor(fd)
        return False
    except OSError:
        return False
    finally:
        os.close(fd)
