"""Safe file updates: atomic replacement, an advisory lock for read-modify-write, and report
files written without replacing what is not fuseci's to replace.

:func:`atomic_write_text` makes readers see the old file or the new one, never half of either,
so readers need no lock; temporary files a killed writer left are swept (:func:`sweep_temporaries`).
:func:`exclusive_lock` serialises writers that read a file, decide and write it back (two
``update-baselines`` of one card), so that neither's result is lost; it locks the directory
itself and leaves nothing behind. :func:`write_output` writes the reports a user asks for, and
:func:`check_outputs` is every command's check that none of its outputs is one of its inputs.

Locking is ``flock`` through the filelock library (imported only when a lock is taken) and
therefore POSIX-only (Linux, macOS; on NFS a lock file stands in for the directory; a file system
without ``flock`` is refused). Elsewhere :func:`exclusive_lock` logs a warning and does not lock:
the replacement stays atomic, but of two concurrent writers the last one wins. What fuseci adds to
the library: locking a directory itself, the wait (its warning, its back-off, deferring to a
claimed next turn) and the name of who holds a lock in a waiter's message.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import re
import secrets
import select
import socket
import stat
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from fuseci.errors import OutputError, UsageError

log = logging.getLogger(__name__)

#: Age after which a temporary file of an atomic write has certainly lost its writer (a write
#: takes milliseconds; an hour leaves room for a stalled network file system).
STALE_TEMPORARY_S = 3600.0


def atomic_write_text(path: Path, text: str, *, links: bool = True) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory and a rename.

    ``path`` itself is replaced: if it is a symbolic link, the link is replaced by a regular
    file and its target is left alone (callers that care refuse links first). With
    ``links=False`` nothing is written through a link at all: neither ``path`` nor its directory
    may be one, and the file is written into the directory that was opened (without following a
    link) and renamed there, so a link put in the directory's place during the write changes
    nothing it points to (where the platform cannot do so, the checks are made by path).

    Raises:
        OSError: the directory cannot be created or written, or the disk is full; with
            ``links=False`` (``errno.ELOOP``), ``path`` or its directory is a symbolic link. The
            old file is left as it was and no temporary file remains.
        UnicodeEncodeError: ``text`` holds a lone surrogate (nothing is written).
    """
    atomic_write_bytes(path, text.encode("utf-8"), links=links)


#: How the temporary file of an atomic write is opened: a new file, never through a link.
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _temporary(path: Path, directory: int | None = None) -> tuple[int, str]:
    """Create the temporary file of an atomic write of ``path``, beside it
    (``.<name>.XXXXXXXX.tmp``, which :func:`sweep_temporaries` knows): in the directory opened as
    ``directory`` when given. It gets the mode ``open()`` gives a new file, 0666 less the umask,
    which the kernel applies: the umask is never read, since setting it to learn it would change
    it for a moment for every thread of the process.

    Returns:
        Its descriptor and its name (a path, or without ``directory`` a name in it).

    Raises:
        OSError: the directory cannot be written.
    """
    for _ in range(100):
        name = f".{path.name}.{secrets.token_hex(4)}.tmp"
        try:
            if directory is None:
                return os.open(path.parent / name, _CREATE, 0o666), str(path.parent / name)
            return os.open(name, _CREATE, 0o666, dir_fd=directory), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free name for a temporary file", str(path.parent))


def atomic_write_bytes(path: Path, data: bytes, *, links: bool = True) -> None:
    """:func:`atomic_write_text` for bytes already encoded.

    Raises:
        OSError: as :func:`atomic_write_text`.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_temporaries(path, STALE_TEMPORARY_S)
    if not links and _AT_FUNCTIONS:
        _write_in_directory(path, data)
        return
    if not links and (path.parent.is_symlink() or path.is_symlink()):
        raise OSError(errno.ELOOP, "is a symbolic link (or its directory is one)", str(path))
    try:
        mode: int | None = path.stat().st_mode & 0o777  # keep the mode of the file being replaced
    except FileNotFoundError:
        mode = None  # a new file: the mode its creation gave it
    fd, tmp = _temporary(path)
    try:
        _fill(fd, data, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


#: Whether files can be opened, looked at and renamed relative to a directory's descriptor here.
_AT_FUNCTIONS = (
    {os.open, os.stat, os.rename, os.unlink} <= os.supports_dir_fd  # os.replace goes with os.rename
    and os.stat in os.supports_follow_symlinks
    and hasattr(os, "O_NOFOLLOW")
    and hasattr(os, "O_DIRECTORY")
)


def _fill(fd: int, data: bytes, mode: int | None) -> None:
    """Write the temporary file ``fd`` (closing it): its mode (None: as it was made), its bytes,
    on disk."""
    with os.fdopen(fd, "wb") as fh:  # owns fd from here on
        if mode is not None and hasattr(os, "fchmod"):  # POSIX, and Windows from Python 3.13
            os.fchmod(fh.fileno(), mode)
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _write_in_directory(path: Path, data: bytes) -> None:
    """:func:`atomic_write_bytes` with ``links=False``: everything relative to the directory's
    descriptor, opened without following a link (``ELOOP`` when it is one)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        directory = os.open(path.parent, flags)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and path.parent.is_symlink():
            raise OSError(errno.ELOOP, "its directory is a symbolic link", str(path.parent)) from None
        raise
    try:
        mode: int | None = None  # a new file: the mode its creation gave it
        try:
            st = os.stat(path.name, dir_fd=directory, follow_symlinks=False)
        except FileNotFoundError:
            pass
        else:
            if stat.S_ISLNK(st.st_mode):
                raise OSError(errno.ELOOP, "is a symbolic link", str(path))
            mode = st.st_mode & 0o777
        fd, name = _temporary(path, directory)  # in the directory opened: a link put in its place changes nothing
        try:
            _fill(fd, data, mode)
            os.replace(name, path.name, src_dir_fd=directory, dst_dir_fd=directory)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=directory)
            raise
    finally:
        os.close(directory)


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


def _holder_line() -> str:
    since = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv and sys.argv[0] else "python"
    return f"pid {os.getpid()} on {socket.gethostname()} since {since} ({command[:200]})\n"


def _read_holder(lock: Path) -> str:
    """Who holds the lock file ``lock``: the line its holder wrote into it (:func:`_write_holder`)."""
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
    """Write who holds the lock into the lock file ``fd`` just locked (filelock's ``on_acquired``)."""
    # Only informs a waiter's message, so a full disk must not stop the holder here.
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, _holder_line().encode("utf-8"), 0)
    except OSError as exc:
        log.debug("cannot record the lock holder: %s", exc)


def _directory_holder(fd: int) -> str:
    """Who holds the flock of a directory: Linux lists every lock in ``/proc/locks`` by device
    and inode, with the holder's pid, whose command line ``/proc/<pid>/cmdline`` gives."""
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
    """Take a lock by ``attempt`` (one try that never waits: true once taken), polling (every
    ``poll_s``, doubling up to ``max_poll_s``), for at most ``timeout_s``; with ``may_try``, only
    at a poll where it says yes.

    Raises:
        LockTimeout: still held by another after ``timeout_s``.
        OSError: the file system cannot lock it.
    """
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

    The directory itself is locked (``flock`` on its descriptor, through filelock's
    ``lock_descriptor``), so nothing is created and nothing can be left behind in it, however the
    holder ends: the kernel releases the lock when the holder exits, even when it is killed. A
    waiter that gives up names the holder (its pid and command, where Linux's ``/proc/locks``
    tells).

    Where the file system cannot lock a directory (NFS), a lock file :data:`FALLBACK_LOCK` in it
    is locked instead (:func:`file_lock`): the holder writes who it is into it and removes it
    before unlocking, so it is there only while an update runs (or after a holder was killed,
    until the next one takes and removes it).

    Args:
        directory: The directory to lock; it must exist and not be a symbolic link.
        timeout_s: How long to wait for another holder before giving up.
        poll_s: First interval between attempts (it doubles up to one second).

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
    """Hold an exclusive advisory lock through the file ``lock`` (created in an existing
    directory, removed on release) for the block: one holder at a time, across processes. For a
    lock that is not a directory's, such as a GPU's turn (:mod:`fuseci.harness`). A waiter
    tries every ``poll_s``, the interval doubling up to ``max_poll_s``: a lock whose waiter
    should start the moment it is free keeps both small. With ``may_try``, a waiter tries only
    when it says yes (another process may have a better claim to the next turn).

    The lock is filelock's ``FileLock`` (``flock``, released by the kernel when the holder exits,
    even when it is killed; never through a symbolic link). The holder writes who it is into the
    file, which a waiter's message names; it removes the file while still holding it, so a waiter
    that locked the removed file tries again on the name (filelock takes no file that has lost
    its name). A file system without ``flock`` is refused (an ``OSError``), never replaced by a
    marker file that a killed holder would leave locked.

    Raises:
        LockTimeout: another process held the lock for ``timeout_s``.
        OSError: the lock file cannot be created, opened or locked, or its directory is missing
            (it is never created).
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
    """Whether another process holds the lock file ``lock`` (:func:`file_lock`) right now. A
    file that is missing or cannot be locked counts as not held; none is created."""
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


def sweep_temporaries(path: Path, older_than_s: float) -> list[Path]:
    """Remove the temporary files a killed writer of ``path`` left beside it
    (``.<name>.XXXXXXXX.tmp``, see :func:`atomic_write_bytes`) that are older than
    ``older_than_s`` seconds: no write takes that long, so their writer is gone. With 0, every one
    goes (for a caller that holds the lock every writer of ``path`` takes). A file that cannot be
    removed is left; nothing raises.

    Returns:
        What was removed.
    """
    pattern = re.compile(re.escape(f".{path.name}.") + r"[a-z0-9_]{8}\.tmp")
    removed: list[Path] = []
    now = time.time()
    try:
        candidates = [p for p in path.parent.iterdir() if pattern.fullmatch(p.name)]
    except OSError:  # no directory yet, or unreadable: nothing to sweep
        return removed
    for p in candidates:
        try:
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode) and now - st.st_mtime >= older_than_s:
                p.unlink()
                removed.append(p)
        except OSError:
            continue
    if removed:
        log.info("removed %d temporary file(s) a stopped writer left: %s", len(removed), ", ".join(map(str, removed)))
    return removed


def same_file(a: Path | str, b: Path | str) -> bool:
    """True when ``a`` and ``b`` are one file: the same inode when both exist (hard and symbolic
    links, ``..`` and case-insensitive file systems included), else the same resolved path."""
    try:
        return os.path.samefile(a, b)
    except ValueError:  # a path no file system takes (a NUL in it, from a document): no file at all
        return False
    except OSError:  # one is missing
        pass
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return False


@dataclass(frozen=True, slots=True)
class Output:
    """A file a command writes, as the user named it."""

    path: Path
    """Where."""
    by: str
    """What named it, for messages: an option (``--junit``), ``$GITHUB_STEP_SUMMARY``, a command."""
    kind: str = "report"
    """What fuseci writes there (``report``, ``baseline``)."""


def check_outputs(outputs: Sequence[Output], inputs: Iterable[tuple[Path | str, str]]) -> None:
    """Refuse outputs that would replace one of the command's inputs, or one another: the one
    check of every command, called before anything is written (and, where it can be, before
    anything is measured).

    Files are compared as files (:func:`same_file`: the inode when both exist, so symbolic and
    hard links and ``..`` are seen through; else the resolved path). An atomic replacement would
    only break a hard link, but an append or a stream (the step summary, a FIFO) writes into the
    file itself, and a report over a suite, a baseline or a run file loses what the user had.

    Args:
        outputs: Every file the command will write.
        inputs: Every file it reads or keeps, with what it is for messages; for a directory it
            was given, every file of it the command reads or keeps (every run file of a results
            directory), not just the ones it happens to read this time.

    Raises:
        UsageError: two outputs name one file.
        OutputError: an output is one of the inputs.
    """
    sources = list(inputs)
    for i, out in enumerate(outputs):
        for other in outputs[:i]:
            if same_file(out.path, other.path):
                raise UsageError(f"{other.by} and {out.by} both name {out.path}: give each {out.kind} its own file")
        for source, what in sources:
            if same_file(out.path, source):
                raise OutputError(
                    f"{out.path}: is {what} ({source}); {out.by} would replace it: fuseci never writes a "
                    f"{out.kind} over a file it reads or keeps, choose another path"
                )


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


#: How long writing to a FIFO waits for a process to open it for reading, and then for the reader
#: to take more (a FIFO nobody reads would otherwise hang fuseci for ever).
FIFO_WAIT_S = 10.0


def _room(fd: int, timeout_s: float) -> bool:
    """Whether ``fd`` can take more bytes within ``timeout_s``."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return bool(poller.poll(timeout_s * 1000))
    return bool(select.select([], [fd], [], timeout_s)[1])


def _write_all(fd: int, data: bytes, path: Path) -> None:
    """Write every byte to ``fd``; through a non-blocking FIFO, waiting at most
    :data:`FIFO_WAIT_S` each time its reader leaves no room.

    Raises:
        OSError: ``fd`` is not a file fuseci writes to, a write failed (a full disk,
            ``/dev/full``, a reader that went away), or the reader stopped reading.
    """
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISREG(mode) or stat.S_ISSOCK(mode)):
        raise OSError(errno.EINVAL, "not a regular file, a character device, a pipe or a socket", str(path))
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            if not _room(fd, FIFO_WAIT_S):
                raise OSError(
                    errno.ETIMEDOUT,
                    f"the process reading it stopped reading (nothing taken for {FIFO_WAIT_S:g} s)",
                    str(path),
                ) from None


def _open_for_writing(path: Path, flags: int) -> int:
    """Open ``path`` for writing without ever blocking: a FIFO is opened non-blocking, which
    fails at once when no process has it open for reading; that is tried again for at most
    :data:`FIFO_WAIT_S` (a reader started just before may not have opened it yet). Anything but a
    FIFO gets a blocking descriptor, as an ordinary open would.

    Raises:
        OSError: ``path`` cannot be opened, or it is a FIFO no process reads.
    """
    deadline = time.monotonic() + FIFO_WAIT_S
    delay = 0.01
    while True:
        try:
            fd = os.open(
                path, flags | getattr(os, "O_NONBLOCK", 0), 0o666
            )  # created as `>>` would: 0666 less the umask
            break
        except OSError as exc:
            left = deadline - time.monotonic()
            if exc.errno != errno.ENXIO:
                raise
            if left <= 0:
                raise OSError(
                    errno.ENXIO, f"is a FIFO and no process reads it (waited {FIFO_WAIT_S:g} s for a reader)", str(path)
                ) from None
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.25)
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode) and hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _stream(path: Path, data: bytes, *, create: bool = False) -> None:
    """Write to a device, a pipe or a descriptor's file as a shell's ``>>`` would: never
    truncated (what was written to a redirected stdout before stays), never renamed over, created
    only with ``create``, and never waiting for ever on a FIFO (:func:`_open_for_writing`)."""
    flags = os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    # Without O_CREAT, a path that changed since it was looked at fails rather than becoming a file.
    fd = _open_for_writing(path, flags | (os.O_CREAT if create else 0))
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
      ``/dev/null`` stays a device and a redirected stdout keeps what was printed before. A FIFO
      that no process reads, or whose reader stops reading, is an error after
      :data:`FIFO_WAIT_S`, never a hang.
    * A directory, a socket or a block device is refused.

    Text that is not valid Unicode (a lone surrogate) is written with backslash escapes, never
    refused half-way.

    Raises:
        OSError: the path cannot be written (a full disk, ``/dev/full``, a FIFO nobody reads) or
            is refused; a file replaced atomically is unchanged.
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


def append_output(path: Path, text: str) -> None:
    """Append ``text`` to ``path`` as a shell's ``>>`` would (GitHub's step summary): a regular
    file (followed through a link) is appended to, or created; a device, a FIFO or a process's
    descriptor is written to as a stream, never waiting for ever on a FIFO; a directory, a socket
    or a block device is refused.

    Raises:
        OSError: the path cannot be written (a full disk, ``/dev/full``, a FIFO nobody reads) or
            is refused.
    """
    data = text.encode("utf-8", "backslashreplace")
    _, own = _descriptor_link(path)
    if own is not None:
        _to_own_descriptor(own, data, path)
        return
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
        what = "a directory" if stat.S_ISDIR(st.st_mode) else "a socket, a block device or another special file"
        raise OSError(errno.EINVAL, f"is {what}, not a file fuseci appends to", str(path))
    _stream(path, data, create=st is None)
