"""Report files written without replacing what is not fuseci's to replace, and the check that no
output of a command is one of its inputs."""

from __future__ import annotations

import errno
import os
import re
import select
import stat
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fuseci.errors import OutputError, UsageError
from fuseci.files.atomic import atomic_write_bytes


def same_file(a: Path | str, b: Path | str) -> bool:
    """True when ``a`` and ``b`` are one file: the same inode when both exist (links, ``..``, case-insensitive
    file systems included), else the same resolved path."""
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
    """Refuse outputs that would replace one of the command's inputs, or one another (:func:`same_file`),
    before anything is written or measured. ``inputs``: every file the command reads or keeps, with what it
    is; for a directory, every file of it the command may read or keep, not just this time's.

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
    """Whether ``path`` goes through a process's descriptor (``/dev/stdout``), and its number when ours."""
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


#: How long writing to a FIFO waits for a reader to open it, and then to take more.
FIFO_WAIT_S = 10.0


def _room(fd: int, timeout_s: float) -> bool:
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return bool(poller.poll(timeout_s * 1000))
    return bool(select.select([], [fd], [], timeout_s)[1])


def _write_all(fd: int, data: bytes, path: Path) -> None:
    """Write every byte to ``fd``; through a FIFO, waiting at most :data:`FIFO_WAIT_S` for room each time."""
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
    """Open ``path`` for writing: a FIFO no process reads yet is retried for :data:`FIFO_WAIT_S`; anything
    but a FIFO gets a blocking descriptor."""
    deadline = time.monotonic() + FIFO_WAIT_S
    delay = 0.01
    while True:
        try:
            fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0), 0o666)  # as `>>`: 0666 less the umask
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
    """Write to a device, a pipe or a descriptor's file as a shell's ``>>`` would (created only with ``create``)."""
    flags = os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    # Without O_CREAT, a path that changed since it was looked at fails rather than becoming a file.
    fd = _open_for_writing(path, flags | (os.O_CREAT if create else 0))
    try:
        _write_all(fd, data, path)
    finally:
        os.close(fd)


def _write(path: Path, text: str, *, append: bool) -> None:
    """:func:`write_output` or :func:`append_output`."""
    data = text.encode("utf-8", "backslashreplace")
    through_descriptor, own = _descriptor_link(path)
    if own is not None:
        # After what Python buffered for it: ``--junit /dev/stdout > log`` reads in the order printed.
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                if stream is not None:
                    stream.flush()
            except (OSError, ValueError):  # a closed or broken stream: nothing of ours is pending in it
                pass
        _write_all(own, data, path)
        return
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None  # nothing there (or a link to nothing): a new file
    if append:
        if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
            what = "a directory" if stat.S_ISDIR(mode) else "a socket, a block device or another special file"
            raise OSError(errno.EINVAL, f"is {what}, not a file fuseci appends to", str(path))
        _stream(path, data, create=mode is None)
        return
    if mode is not None:
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
        if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or (stat.S_ISREG(mode) and through_descriptor):
            _stream(path, data)
            return
        if not stat.S_ISREG(mode):
            what = "a block device" if stat.S_ISBLK(mode) else "a socket or another special file"
            raise OSError(errno.EINVAL, f"is {what}, not a file fuseci writes reports to", str(path))
    elif through_descriptor:
        raise FileNotFoundError(errno.ENOENT, "no such open file descriptor", str(path))
    target = Path(os.path.realpath(path))
    if path.is_symlink() and not target.parent.is_dir():
        raise FileNotFoundError(
            errno.ENOENT, f"is a symbolic link to {os.readlink(path)}, whose directory does not exist", str(path)
        )
    atomic_write_bytes(target, data)


def write_output(path: Path, text: str) -> None:
    """Write a report the user asked for at ``path``, without replacing what is not ours to replace.

    * A new path or a regular file is replaced atomically; a symbolic link is followed (as ``>`` would).
    * A character device, a FIFO, or any file reached through a process's descriptor (``/dev/stdout``)
      is written to as a stream; a FIFO that no one reads is an error after :data:`FIFO_WAIT_S`.
    * A directory, a socket or a block device is refused. A lone surrogate is written escaped.

    Raises:
        OSError: the path cannot be written (a full disk, a FIFO nobody reads) or is refused.
    """
    _write(path, text, append=False)


def append_output(path: Path, text: str) -> None:
    """Append ``text`` to ``path`` as a shell's ``>>`` would (GitHub's step summary).

    Raises:
        OSError: the path cannot be written (a full disk, a FIFO nobody reads) or is refused.
    """
    _write(path, text, append=True)
