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
import re
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
        UnicodeEncodeError: ``text`` holds a lone surrogate (nothing is written).
    """
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """:func:`atomic_write_text` for bytes already encoded.

    Raises:
        OSError: as :func:`atomic_write_text`.
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
        with os.fdopen(fd, "wb") as fh:  # owns fd from here on
            if hasattr(os, "fchmod"):  # POSIX, and Windows from Python 3.13
                os.fchmod(fh.fileno(), mode)  # mkstemp creates 0600
            fh.write(data)
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


def same_file(a: Path | str, b: Path | str) -> bool:
    """True when ``a`` and ``b`` are one file: the same inode when both exist (hard and symbolic
    links, ``..`` and case-insensitive file systems included), else the same resolved path."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # one is missing (or a path no file system takes)
        return os.path.realpath(a) == os.path.realpath(b)


_FD_DIRECTORY = re.compile(r"\A(?:/dev/fd|/proc/([0-9]+)(?:/task/[0-9]+)?/fd)\Z")


def _descriptor_link(path: Path) -> tuple[bool, int | None]:
    """Whether ``path`` reaches its file through a process's descriptor (``/dev/stdout``,
    ``/dev/fd/N``, ``/proc/self/fd/N``), and the descriptor's number when it is one of this
    process's own. Such a file is whatever the descriptor is open on (a terminal, a pipe, a file
    the shell redirected stdout to): it must be written to, never replaced."""
    p = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on a chain of links
        parent = os.path.realpath(os.path.dirname(p))
        m = _FD_DIRECTORY.match(parent)
        if m:
            name = os.path.basename(p)
            own = re.fullmatch("[0-9]{1,9}", name) is not None and (m.group(1) in (None, str(os.getpid())))
            return True, int(name) if own else None
        if parent == "/proc" or parent.startswith("/proc/"):
            return True, None
        try:
            link = os.readlink(p)
        except OSError:  # not a link (or gone): the chain ends here
            return False, None
        p = os.path.join(parent, link)
    return False, None


def _write_all(fd: int, data: bytes, path: Path) -> None:
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISREG(mode) or stat.S_ISSOCK(mode)):
        raise OSError(errno.EINVAL, "not a regular file, a character device, a pipe or a socket", str(path))
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _stream(path: Path, data: bytes) -> None:
    """Write to a device, a pipe or a descriptor's file as a shell's ``>>`` would: never created,
    never truncated (what was written to a redirected stdout before stays), never renamed over."""
    flags = os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)  # no O_CREAT: if the path changed since it was looked at, this fails
    try:
        _write_all(fd, data, path)
    finally:
        os.close(fd)


def _to_own_descriptor(fd: int, data: bytes, path: Path) -> None:
    """Write through this process's own descriptor, at its offset, after what Python buffered
    for it: ``--junit /dev/stdout > log`` then reads in the order it was printed."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: nothing of ours is pending in it
            pass
    _write_all(fd, data, path)


def write_output(path: Path, text: str) -> None:
    """Write a report the user asked for at ``path``, without replacing what is not ours to replace.

    * A new path, or a regular file, is replaced atomically (a reader sees the old report or the
      new one). A symbolic link is followed: its target is replaced and the link stays a link to
      it (the user named the link; writing where it points is what ``>`` would do). A link whose
      target's directory does not exist is an error: no directory is created through a link.
    * A character device or a FIFO (``/dev/null``, a terminal, a named pipe), and any file reached
      through a process's descriptor (``/dev/stdout``, ``/dev/fd/N``, even when the shell
      redirected it to a regular file), is written to as a stream and never renamed over, so
      ``/dev/null`` stays a device and a redirected stdout keeps what was printed before. Writing
      to a FIFO waits for a reader, as a shell's redirection does.
    * A directory, a socket or a block device is refused.

    Text that is not valid Unicode (a lone surrogate) is written with backslash escapes, never
    refused half-way.

    Raises:
        OSError: the path cannot be written or is refused; nothing at it was changed.
    """
    data = text.encode("utf-8", "backslashreplace")
    through_descriptor, own = _descriptor_link(path)
    if own is not None:
        _to_own_descriptor(own, data, path)
        return
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None  # nothing there (or a link to nothing): a new file
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
        if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode) or (stat.S_ISREG(st.st_mode) and through_descriptor):
            _stream(path, data)
            return
        if not stat.S_ISREG(st.st_mode):
            what = "a block device" if stat.S_ISBLK(st.st_mode) else "a socket or another special file"
            raise OSError(errno.EINVAL, f"is {what}, not a file fuseci writes reports to", str(path))
    elif through_descriptor:
        raise FileNotFoundError(errno.ENOENT, "no such open file descriptor", str(path))
    linked = path.is_symlink()
    target = Path(os.path.realpath(path))
    if linked and not target.parent.is_dir():
        raise FileNotFoundError(
            errno.ENOENT, f"is a symbolic link to {os.readlink(path)}, whose directory does not exist", str(path)
        )
    atomic_write_bytes(target, data)
