"""Safe file updates: atomic replacement, and an advisory lock for read-modify-write.

:func:`atomic_write_text` makes readers see the old file or the new one, never half of either,
so readers need no lock. :func:`exclusive_lock` serialises writers that read a file, decide and
write it back (two ``update-baselines`` of one suite), so that neither's result is lost.

Locking is ``fcntl.flock`` and therefore POSIX-only (Linux, macOS; NFS emulates it with POSIX
record locks). Elsewhere :func:`exclusive_lock` logs a warning and does not lock: the
replacement stays atomic, but of two concurrent writers the last one wins.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

if sys.platform != "win32":
    import fcntl

log = logging.getLogger(__name__)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory and a rename.

    ``path`` itself is replaced: if it is a symbolic link, the link is replaced by a regular
    file and its target is left alone (callers that care refuse links first).

    Raises:
        OSError: the directory cannot be created or written, or the disk is full; the old file is
            left as it was and no temporary file remains.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o777  # keep the mode of the file being replaced
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask  # what open() would have given a new file
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:  # owns fd from here on
            if hasattr(os, "fchmod"):  # POSIX, and Windows from Python 3.13
                os.fchmod(fh.fileno(), mode)  # mkstemp creates 0600
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class LockTimeout(TimeoutError):
    """Another process held the lock for longer than the caller would wait."""

    def __init__(self, lock: Path, waited_s: float, holder: str) -> None:
        super().__init__(f"{lock}: still locked after {waited_s:g} s by {holder}")
        self.lock = lock
        """The lock file."""
        self.waited_s = waited_s
        """How long the caller waited."""
        self.holder = holder
        """Who holds it, as the holder wrote it into the lock file (or a placeholder)."""


def _holder_line() -> str:
    since = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv and sys.argv[0] else "python"
    return f"pid {os.getpid()} on {socket.gethostname()} since {since} ({command[:200]})\n"


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 1000, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text or "a process that has not written its name into the lock file yet"


def _write_holder(fd: int, line: str) -> None:
    # Only informs a waiter's message, so a full disk must not stop the holder here.
    try:
        os.ftruncate(fd, 0)
        if line:
            os.pwrite(fd, line.encode("utf-8"), 0)
    except OSError as exc:
        log.debug("cannot record the lock holder: %s", exc)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


@contextmanager
def exclusive_lock(lock: Path, timeout_s: float, poll_s: float = 0.05) -> Iterator[None]:
    """Hold an exclusive advisory lock on the file ``lock`` (created if missing) for the block.

    The holder writes who it is into the lock file, so that a waiter that gives up can say what
    it waited for. The file is left in place afterwards: deleting a lock file while another
    process waits on it would let a third process lock a new file of the same name, and both
    would think they held the lock. The kernel releases the lock when the holder exits, however
    it exits, so a leftover file never blocks anyone.

    Args:
        lock: The lock file; its directory must exist.
        timeout_s: How long to wait for another holder before giving up.
        poll_s: First interval between attempts (it doubles up to one second).

    Raises:
        LockTimeout: another process held the lock for ``timeout_s``.
        OSError: the lock file cannot be created or opened (read-only directory, for instance).
    """
    if sys.platform == "win32":
        log.warning("%s: not locked: file locking is POSIX-only; concurrent updates are not serialised", lock)
        yield
        return
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        deadline = time.monotonic() + timeout_s
        delay = poll_s
        waiting = False
        while not _try_lock(fd):
            left = deadline - time.monotonic()
            if left <= 0:
                raise LockTimeout(lock, timeout_s, _read_holder(fd))
            if not waiting:  # a warning, so that a silent wait does not look like a hang
                log.warning("%s is held by %s; waiting up to %g s", lock, _read_holder(fd), timeout_s)
                waiting = True
            time.sleep(min(delay, left))
            delay = min(delay * 2, 1.0)
        _write_holder(fd, _holder_line())
        try:
            yield
        finally:
            _write_holder(fd, "")  # before unlocking, so that no one reads a stale holder
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def write_output(path: Path, text: str) -> None:
    """Write a report the user asked for at ``path``, without replacing what is not ours to replace.

    A regular file (or a new one) is replaced atomically, through any symbolic links to it (the
    link stays a link); a character device or FIFO (``/dev/null``, ``/dev/stdout``, a pipe) is
    written to as a stream, never renamed over. Anything else (a directory, a socket) is refused.

    Raises:
        OSError: the path cannot be written; nothing at it was changed.
    """
    target = Path(os.path.realpath(path))
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
        with open(target, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        return
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
        raise OSError(errno.EINVAL, "not a regular file, a device or a FIFO", str(path))
    atomic_write_text(target, text)
