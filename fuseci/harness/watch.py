"""Which files of a tree a case's checked calls ran and read: the harness's half of the audit of
``fuseci ab``'s case fingerprints (:mod:`fuseci.ab.audit`). While a watch is held, every Python
function that starts and every file opened for reading under the tree (outside fuseci, the
interpreter's directories and those left out) is noted; compiled extensions are not seen."""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import fuseci
from fuseci.config.resolve import environment_dirs
from fuseci.measure.caches import CACHE_ENVS
from fuseci.measure.command import AUDIT_TREE_ENV
from fuseci.records.harness import CaseRecord

log = logging.getLogger(__name__)

#: ``inspect.CO_NEWLOCALS``: set on a function's code, not on a module's or a class body's.
_CO_NEWLOCALS = 0x0002

#: The ``sys.monitoring`` tool ids tried, in order (a coverage tool or a debugger may hold one).
_TOOL_IDS = (2, 5, 4, 3)


@dataclass(slots=True)
class Watched:
    """What one watch saw of the tree."""

    ran: dict[str, set[int]] = field(default_factory=dict)
    """Tree-relative file → the first lines of the functions that started there (``0`` for its
    module's own code)."""
    read: set[str] = field(default_factory=set)
    """Tree-relative files opened for reading."""

    def add(self, other: Watched) -> None:
        """Note what ``other`` saw too."""
        for path, lines in other.ran.items():
            self.ran.setdefault(path, set()).update(lines)
        self.read |= other.read


class _Files:
    """Which file names lie under the tree, and as what tree-relative path (cached by name)."""

    def __init__(self, tree: Path, leave_out: Iterable[Path]) -> None:
        self.tree = Path(os.path.realpath(tree))
        self.leave_out = tuple(
            Path(os.path.realpath(p))
            for p in (Path(fuseci.__file__).parent, *environment_dirs(), self.tree / ".git", *leave_out)
        )
        self.known: dict[str, str | None] = {}

    def relative(self, name: str) -> str | None:
        """``name`` as a tree-relative path; None when it is not one of the tree's files to note."""
        if name in self.known:
            return self.known[name]
        rel = None
        if name and not name.startswith("<"):
            path = Path(os.path.realpath(name))
            if path.is_relative_to(self.tree) and not any(path.is_relative_to(d) for d in self.leave_out):
                rel = _source_of(path.relative_to(self.tree)).as_posix()
        self.known[name] = rel
        return rel


def _source_of(rel: Path) -> Path:
    """A byte-code file of ``__pycache__`` as its source file."""
    if rel.parent.name == "__pycache__" and rel.suffix == ".pyc":
        return rel.parent.parent / (rel.name.split(".")[0] + ".py")
    return rel


def _reads(mode: object, flags: object) -> bool:
    """Whether an ``open`` audit event's mode (or, for ``os.open``, flags) opens for reading."""
    if isinstance(mode, str):
        return "r" in mode or "+" in mode
    return not isinstance(flags, int) or flags & os.O_ACCMODE != os.O_WRONLY


#: The watch noting files opened right now (the audit hook reads it); None while none is.
_opening: Watch | None = None
_hooked = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    """The process's audit hook: a file opened for reading, while a watch is held."""
    watch = _opening
    if watch is None or event != "open":
        return
    try:
        path, mode, flags = args
        if isinstance(path, int):  # os.fdopen of a descriptor: its open was seen
            return
        watch.opened(os.fsdecode(path), mode, flags)
    except Exception:  # an audit hook's exception would surface in the code that opened the file
        log.debug("open event not noted: %r", args, exc_info=True)


class Watch:
    """Watches of one tree: what the import of each module, and the last watch of each case, noted."""

    def __init__(self, tree: Path, leave_out: Iterable[Path] = ()) -> None:
        self.files = _Files(tree, leave_out)
        self.imported: dict[str, Watched] = {}
        """Module name → what its import ran and read."""
        self.cases: dict[str, Watched] = {}
        """Case id → what its checked calls (and its modules' imports) ran and read."""
        self._seen: Watched | None = None
        self._codes: set[CodeType] = set()

    def code(self, code: CodeType) -> None:
        """A function started (the monitors call this)."""
        seen = self._seen
        if seen is None or code in self._codes:
            return
        self._codes.add(code)
        rel = self.files.relative(code.co_filename)
        if rel is not None:
            # A module's or a class body's code runs when the module is imported: noted as 0.
            seen.ran.setdefault(rel, set()).add(code.co_firstlineno if code.co_flags & _CO_NEWLOCALS else 0)

    def opened(self, path: str, mode: object, flags: object) -> None:
        """A file was opened (the audit hook calls this); noted only if it exists (the event comes
        before the open, and the import system tries names that are no files)."""
        seen = self._seen
        if seen is not None and _reads(mode, flags):
            full = os.path.abspath(path)
            rel = self.files.relative(full)
            if rel is not None and os.path.isfile(full):
                seen.read.add(rel)

    @contextmanager
    def watching(self) -> Iterator[Watched]:
        """Note what the block runs and reads of the tree."""
        global _opening, _hooked
        seen = Watched()
        self._seen, self._codes = seen, set()
        if not _hooked:
            sys.addaudithook(_audit)
            _hooked = True
        # each function's code as it starts, until stop() is called
        stop = _monitor_events(self.code) if sys.version_info >= (3, 12) else _monitor_trace(self.code)
        _opening = self
        try:
            yield seen
        finally:
            _opening = None
            stop()
            self._seen = None

    @contextmanager
    def importing(self, module: str) -> Iterator[None]:
        """Note, as :attr:`imported`, what importing ``module`` runs and reads."""
        with self.watching() as seen:
            yield
        self.imported.setdefault(module, Watched()).add(seen)

    @contextmanager
    def checking(self, case: str, modules: Iterable[str]) -> Iterator[None]:
        """Note, as :attr:`cases`, what a case's checked calls run and read, with what the import
        of its ``modules`` did."""
        with self.watching() as seen:
            yield
        for module in modules:
            seen.add(self.imported.get(module, Watched()))
        self.cases[case] = seen


def _monitor_events(on_code: Callable[[CodeType], None]) -> Callable[[], None]:
    """``sys.monitoring`` (Python 3.12+): each code object once, then disabled."""
    mon: Any = getattr(sys, "monitoring")  # noqa: B009 (absent before 3.12, which mypy also checks for)
    tool = next((t for t in _TOOL_IDS if mon.get_tool(t) is None), None)
    if tool is None:
        log.warning("no sys.monitoring tool id free: the case fingerprints are not audited in this process")
        return lambda: None

    def started(code: CodeType, offset: int) -> object:
        on_code(code)
        return mon.DISABLE

    mon.use_tool_id(tool, "fuseci audit")
    mon.register_callback(tool, mon.events.PY_START, started)
    mon.set_events(tool, mon.events.PY_START)
    mon.restart_events()  # what an earlier watch disabled counts again

    def stop() -> None:
        mon.set_events(tool, 0)
        mon.register_callback(tool, mon.events.PY_START, None)
        mon.free_tool_id(tool)

    return stop


def _monitor_trace(on_code: Callable[[CodeType], None]) -> Callable[[], None]:
    """``sys.settrace`` (Python 3.10 and 3.11), in this thread and those started meanwhile; no line is traced."""
    before, before_threads = sys.gettrace(), threading.gettrace()
    known: set[CodeType] = set()

    def trace(frame: FrameType, event: str, arg: object) -> None:
        code = frame.f_code
        if code not in known:  # each code object once: the callback is on every call's path
            known.add(code)
            on_code(code)

    sys.settrace(trace)
    threading.settrace(trace)

    def stop() -> None:
        sys.settrace(before)
        threading.settrace(before_threads)

    return stop


#: The harness's watch, once :func:`start` made one.
_watch: Watch | None = None


def start(tree: Path, leave_out: Iterable[Path] = ()) -> Watch:
    """Watch ``tree`` in this process from now on."""
    global _watch
    _watch = Watch(tree, leave_out)
    return _watch


def start_if_asked(outputs: Path) -> Watch | None:
    """:func:`start` on the tree :data:`~fuseci.measure.command.AUDIT_TREE_ENV` names, leaving out
    ``outputs`` and the compile caches; None when it names none."""
    tree = os.environ.get(AUDIT_TREE_ENV)
    if not tree:
        return None
    caches = [Path(os.environ[e]) for e in CACHE_ENVS if os.environ.get(e)]
    if sys.pycache_prefix:  # PYTHONPYCACHEPREFIX: byte code of sources whose running is noted already
        caches.append(Path(sys.pycache_prefix))
    log.debug("watching what each case's checked calls run and read in %s", tree)
    return start(Path(tree), [outputs, *caches])


def importing(module: str) -> AbstractContextManager[None]:
    """:meth:`Watch.importing` of the started watch; nothing when none was started."""
    return nullcontext() if _watch is None else _watch.importing(module)


def checking(case: str, modules: Iterable[str]) -> AbstractContextManager[None]:
    """:meth:`Watch.checking` of the started watch; nothing when none was started."""
    return nullcontext() if _watch is None else _watch.checking(case, modules)


def noted(record: CaseRecord) -> CaseRecord:
    """``record`` with what the started watch noted of its case (``ran``, ``read``), if anything."""
    seen = None if _watch is None else _watch.cases.get(record.case)
    if seen is None:
        return record
    ran = {path: tuple(sorted(lines)) for path, lines in sorted(seen.ran.items())}
    return replace(record, ran=ran, read=tuple(sorted(seen.read)))
