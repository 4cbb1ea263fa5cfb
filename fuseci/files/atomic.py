"""Atomic replacement: readers see the old file or the new one, never half of either, and need
no lock; temporary files a killed writer left are swept."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import secrets
import stat
import time
from pathlib import Path

log = logging.getLogger(__name__)

#: Age after which a temporary file of an atomic write has certainly lost its writer (a write
#: takes milliseconds; an hour leaves room for a stalled network file system).
STALE_TEMPORARY_S = 3600.0


def atomic_write_text(path: Path, text: str, *, links: bool = True) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory and a rename.

    ``path`` itself is replaced (a symbolic link there by a regular file). With ``links=False`` neither
    ``path`` nor its directory may be a link, and the file is written and renamed relative to the
    directory's descriptor, so a link put in the directory's place during the write changes nothing.

    Raises:
        OSError: the directory cannot be created or written, the disk is full, or (``links=False``,
            ``errno.ELOOP``) a symbolic link is in the way; the old file and no temporary file remain.
        UnicodeEncodeError: ``text`` holds a lone surrogate (nothing is written).
    """
    atomic_write_bytes(path, text.encode("utf-8"), links=links)


#: How the temporary file of an atomic write is opened: a new file, never through a link.
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _temporary(path: Path, directory: int | None = None) -> tuple[int, str]:
    """Create the temporary file of ``path`` beside it (in the open ``directory`` when given), mode 0666
    less the umask; its descriptor and its name (a path, or with ``directory`` a name in it)."""
    for _ in range(100):
        name = f".{path.name}.{secrets.token_hex(4)}.tmp"
        try:
            if directory is None:
                return os.open(path.parent / name, _CREATE, 0o666), str(path.parent / name)
            return os.open(name, _CREATE, 0o666, dir_fd=directory), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free name for a temporary file", str(path.parent))


#: Whether files can be opened, looked at and renamed relative to a directory's descriptor here.
_AT_FUNCTIONS = (
    {os.open, os.stat, os.rename, os.unlink} <= os.supports_dir_fd  # os.replace goes with os.rename
    and os.stat in os.supports_follow_symlinks
    and hasattr(os, "O_NOFOLLOW")
    and hasattr(os, "O_DIRECTORY")
)


def _open_directory(path: Path) -> int:
    """The directory of ``path``, opened without following a link (``ELOOP`` when it is one)."""
    try:
        return os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and path.parent.is_symlink():
            raise OSError(errno.ELOOP, "its directory is a symbolic link", str(path.parent)) from None
        raise


def atomic_write_bytes(path: Path, data: bytes, *, links: bool = True) -> None:
    """:func:`atomic_write_text` for bytes already encoded.

    Raises:
        OSError: as :func:`atomic_write_text`.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_temporaries(path, STALE_TEMPORARY_S)
    if not links and not _AT_FUNCTIONS and (path.parent.is_symlink() or path.is_symlink()):
        raise OSError(errno.ELOOP, "is a symbolic link (or its directory is one)", str(path))
    # With links=False, everything relative to the directory's descriptor: a link put in its place changes nothing.
    directory = _open_directory(path) if not links and _AT_FUNCTIONS else None
    target = path if directory is None else path.name
    try:
        try:
            st = os.stat(target, dir_fd=directory, follow_symlinks=directory is None)
        except FileNotFoundError:
            mode = None  # a new file: the mode its creation gave it
        else:
            if stat.S_ISLNK(st.st_mode):
                raise OSError(errno.ELOOP, "is a symbolic link", str(path))
            mode = st.st_mode & 0o777  # keep the mode of the file being replaced
        fd, tmp = _temporary(path, directory)
        try:
            with os.fdopen(fd, "wb") as fh:  # owns fd from here on
                if mode is not None and hasattr(os, "fchmod"):  # POSIX, and Windows from Python 3.13
                    os.fchmod(fh.fileno(), mode)
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target, src_dir_fd=directory, dst_dir_fd=directory)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=directory)
            raise
    finally:
        if directory is not None:
            os.close(directory)


def sweep_temporaries(path: Path, older_than_s: float) -> None:
    """Remove the temporary files a killed writer of ``path`` left beside it, older than ``older_than_s``
    (0: every one, for a caller holding the lock every writer takes); nothing raises."""
    pattern = re.compile(re.escape(f".{path.name}.") + r"[a-z0-9_]{8}\.tmp")
    removed: list[Path] = []
    now = time.time()
    try:
        candidates = [p for p in path.parent.iterdir() if pattern.fullmatch(p.name)]
    except OSError:  # no directory yet, or unreadable: nothing to sweep
        return
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
