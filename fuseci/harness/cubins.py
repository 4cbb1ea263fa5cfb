"""Which cubins the harness process built or loaded, noted by an audit hook on ``open`` and
followed through a rename (a cache entry written to a temporary file, then moved into place), for
:mod:`fuseci.measure.disassembly`. Files opened from C alone (cuBLAS's, cuDNN's) are not seen."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

#: Files noted at most: a process that opens more is not one fuseci's suites make.
MAX_FILES = 100_000
_SUFFIX = ".cubin"
#: Cubins opened (absolute paths), in the order first opened.
_OPENED: dict[str, None] = {}
#: Other files opened for writing, which a rename may make cubins.
_WRITTEN: dict[str, None] = {}
_LISTENING: list[bool] = []


def _path(value: object) -> str | None:
    if isinstance(value, (str, bytes, os.PathLike)):
        try:
            return os.path.abspath(os.fsdecode(value))
        except (TypeError, ValueError):
            return None
    return None  # a file descriptor


def _writes(args: tuple[Any, ...]) -> bool:
    mode, flags = (*args[1:3], None, None)[:2]
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & (os.O_WRONLY | os.O_RDWR))


def _audit(event: str, args: tuple[Any, ...]) -> None:
    # An audit hook must not raise, and runs at every open: cheap tests first.
    if event == "open" and args and len(_OPENED) + len(_WRITTEN) < MAX_FILES:
        if (path := _path(args[0])) is None:
            return
        if path.endswith(_SUFFIX):
            _OPENED.setdefault(path, None)
        elif _writes(args):
            _WRITTEN.setdefault(path, None)
    elif event == "os.rename" and len(args) >= 2:
        src, dst = _path(args[0]), _path(args[1])
        if src in _WRITTEN and dst is not None and dst.endswith(_SUFFIX):
            _WRITTEN.pop(src)
            _OPENED.setdefault(dst, None)


def listen() -> None:
    """Note every file the process opens from now on (once per process: a hook stays)."""
    if not _LISTENING:
        _LISTENING.append(True)
        sys.addaudithook(_audit)


def opened() -> list[Path]:
    """The cubins opened since :func:`listen` that still exist, in the order first opened."""
    return [Path(p) for p in list(_OPENED) if os.path.isfile(p)]
