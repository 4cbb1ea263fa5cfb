"""A bounded, safe YAML reader for suite files: plain data only, every mapping a
:class:`LineDict` that keeps its keys' lines. A hostile file fails in one line, in bounded time
and memory, with nothing run (docs/SECURITY.md)."""

from __future__ import annotations

import errno
import os
import re
import select
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import yaml
import yaml.composer
import yaml.constructor
import yaml.parser
import yaml.reader
import yaml.resolver
import yaml.scanner

from fuseci.config.policy import brief_repr
from fuseci.errors import SuiteError

#: Largest suite file read; the shipped suites are a few KiB.
MAX_FILE_BYTES = 1 << 20
#: How long a FIFO's reader waits for a writer to open it (one that is starting up) before it reads as empty.
FIFO_WRITER_WAIT_S = 3.0
#: Most YAML nodes in a document, counting every alias as a copy of what it names: what any walk
#: of the loaded data visits (an alias bomb is small in memory, but exponential to walk).
MAX_NODES = 100_000
#: Deepest nesting of mappings and lists; a suite needs about 7 levels.
MAX_DEPTH = 64
#: Longest integer literal; turning a long one into an int is quadratic (or refused by Python).
MAX_INT_CHARS = 64
_MERGE_TAG = "tag:yaml.org,2002:merge"

# What YAML allows in a stream (as PyYAML's Reader), checked up front to say where a bad character is.
_NOT_YAML_CHARS = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


class LineDict(dict[str, Any]):
    """A mapping that remembers the line it started on and the line of each of its keys."""

    line: int = 0
    """1-based line of the mapping's first key (0 when not read from a file)."""
    key_lines: dict[Any, int]
    """1-based line of each key."""

    def line_of(self, key: object) -> int:
        """The line of ``key``, else of the mapping itself."""
        lines = getattr(self, "key_lines", None)
        return (lines or {}).get(key, self.line)


class _Refused(yaml.MarkedYAMLError):
    """A document the loader will not build: over a limit, or a key it cannot take."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(None, None, problem, mark)


class _BoundedComposer(yaml.composer.Composer, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
    """Composes nodes like PyYAML's composer (and constructs like SafeLoader), stopping at
    :data:`MAX_NODES`, an alias counted as its expanded size, or :data:`MAX_DEPTH`."""

    if TYPE_CHECKING:  # provided by the parser each loader mixes in

        def get_event(self) -> Any: ...
        def peek_event(self) -> Any: ...
        def check_event(self, *choices: Any) -> bool: ...
        def dispose(self) -> None: ...

    def _init_loader(self) -> None:
        """The composer's, constructor's and resolver's state, and the counts of the limits."""
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self._expanded = 0
        self._aliases = 0
        self._depth = 0
        self._sizes: dict[str, int] = {}
        self._explicit: dict[int, set[int]] = {}

    def _count(self, n: int, mark: Any) -> None:
        self._expanded += n
        if self._expanded > MAX_NODES:
            via = f" once its {self._aliases} aliases are expanded (an alias bomb?)" if self._aliases else ""
            raise _Refused(
                f"the document holds more than {MAX_NODES} values{via}; a suite is far smaller: "
                "write repeated parts out, or split the file into several suites",
                mark,
            )

    def get_single_node(self) -> Any:
        self.get_event()  # STREAM-START
        document = None
        if not self.check_event(yaml.StreamEndEvent):
            document = self.compose_document()
        if not self.check_event(yaml.StreamEndEvent):
            event = self.get_event()
            raise _Refused(
                "a second YAML document starts here; a suite file is one document: "
                "remove the '---' or '...' line, or put the second suite in its own file",
                event.start_mark,
            )
        self.get_event()  # STREAM-END
        return document

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if self.check_event(yaml.AliasEvent):
            size = self._sizes.get(event.anchor)
            if size is None and event.anchor in self.anchors:
                raise _Refused(
                    f"alias *{event.anchor} is used inside the value it names (a recursive structure); "
                    "write the value out instead",
                    event.start_mark,
                )
            self._aliases += 1
            self._count(size or 0, event.start_mark)  # an undefined alias is reported by the base class
            return super().compose_node(parent, index)
        if self._depth >= MAX_DEPTH:
            raise _Refused(
                f"nested more than {MAX_DEPTH} levels deep; a suite needs about 7: check the indentation and brackets",
                event.start_mark,
            )
        before = self._expanded
        self._count(1, event.start_mark)
        self._depth += 1
        node = super().compose_node(parent, index)
        self._depth -= 1
        if event.anchor is not None:
            self._sizes[event.anchor] = self._expanded - before
        return node

    def flatten_mapping(self, node: Any) -> None:
        # Remember which keys were written in the mapping itself before merge keys (<<) copy
        # others in: only those may not repeat; a merged key is overridden, as YAML says.
        if id(node) not in self._explicit:
            self._explicit[id(node)] = {id(k) for k, _ in node.value if k.tag != _MERGE_TAG}
        super().flatten_mapping(node)


class _PyLoader(_BoundedComposer, yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser):
    """SafeLoader with the limits of :class:`_BoundedComposer`, on PyYAML's pure-Python parser."""

    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        self._init_loader()


_Loader: Any = _PyLoader
if yaml.__with_libyaml__:
    from yaml._yaml import CParser

    class _CLoader(_BoundedComposer, CParser):
        """The same on libyaml's parser (four times faster); composing stays ours, for the limits."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            self._init_loader()

    _Loader = _CLoader


def _construct_mapping(loader: _BoundedComposer, node: Any) -> LineDict:
    if not isinstance(node, yaml.MappingNode):
        raise _Refused(f"a value tagged {_short_tag(node.tag)} must be a mapping", node.start_mark)
    loader.flatten_mapping(node)
    explicit = loader._explicit.get(id(node), set())
    written: set[object] = set()
    out = LineDict()
    out.line = node.start_mark.line + 1
    out.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise _Refused(f"a mapping key must be a plain value, not a {kind(key)}", key_node.start_mark) from None
        if id(key_node) in explicit:
            if key in written:
                raise _Refused(
                    f"key {brief_repr(key)} appears twice in one mapping; keep one of them", key_node.start_mark
                )
            written.add(key)
        out[key] = loader.construct_object(value_node, deep=True)
        # A key written in the mapping overrides one merged in with <<, and so does its line.
        if id(key_node) in explicit or key not in out.key_lines:
            out.key_lines[key] = key_node.start_mark.line + 1
    return out


def _construct_int(loader: _BoundedComposer, node: Any) -> Any:
    if isinstance(node, yaml.ScalarNode) and len(node.value) > MAX_INT_CHARS:
        raise _Refused(
            f"an integer of {len(node.value)} characters; numbers in a suite need at most {MAX_INT_CHARS}",
            node.start_mark,
        )
    return loader.construct_yaml_int(node)


def _guarded(construct: Any) -> Any:
    """A scalar constructor whose errors (``!!int x``, the date ``2024-13-01``) are located YAML errors."""

    def guarded(loader: _BoundedComposer, node: Any) -> Any:
        try:
            return construct(loader, node)
        except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError):
            raise _Refused(
                f"cannot read {brief_repr(node.value)} as {_short_tag(node.tag)}; "
                "write a valid one, or quote it to make it a string",
                node.start_mark,
            ) from None

    return guarded


def _register_constructors(loader: Any) -> None:
    for tag in ("null", "bool", "float", "binary", "timestamp"):
        full = f"tag:yaml.org,2002:{tag}"
        loader.add_constructor(full, _guarded(yaml.constructor.SafeConstructor.yaml_constructors[full]))
    loader.add_constructor("tag:yaml.org,2002:int", _guarded(_construct_int))
    loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


_register_constructors(_BoundedComposer)


def _short_tag(tag: str) -> str:
    return tag.replace("tag:yaml.org,2002:", "!!")


def kind(value: object) -> str:
    """What a YAML reader would call the type of a loaded value."""
    if isinstance(value, bool):
        return "boolean"
    for cls, name in ((dict, "mapping"), (list, "list"), (str, "string"), (int, "integer"), (float, "number")):
        if isinstance(value, cls):
            return name
    return "null" if value is None else type(value).__name__


def _open_without_waiting(path: Path) -> BinaryIO:
    """Open for reading; a FIFO that no writer opens within :data:`FIFO_WRITER_WAIT_S` reads as empty
    instead of hanging ``open``."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        if stat.S_ISFIFO(mode):  # before any writer opens it, a read would find its end at once
            select.select([fd], [], [], FIFO_WRITER_WAIT_S)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_text(path: Path) -> str:
    try:
        with _open_without_waiting(path) as f:
            raw = f.read(MAX_FILE_BYTES + 1)
            size = os.fstat(f.fileno()).st_size
    except FileNotFoundError:
        raise SuiteError(f"{path}: suite file not found") from None
    except IsADirectoryError:
        raise SuiteError(f"{path}: is a directory; pass a suite file (suites/*.yaml)") from None
    except OSError as exc:
        raise SuiteError(f"{path}: cannot read: {exc.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        # st_size is 0 for a pipe or a device: say what is known.
        shown = f"is {size / 2**20:.1f} MiB," if size > MAX_FILE_BYTES else "goes"
        raise SuiteError(
            f"{path}: the file {shown} over the {MAX_FILE_BYTES >> 20} MiB limit for a suite file; "
            "split it into several suites"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise SuiteError(
            f"{path}:{line}: not a text file (byte {exc.start}, 0x{raw[exc.start]:02x}, is not UTF-8); "
            "save the suite as UTF-8"
        ) from None
    bad = _NOT_YAML_CHARS.search(text)
    if bad:
        at = bad.start()
        line, column = text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)
        code = ord(bad.group())
        control = "control " if code < 0x20 or 0x7F <= code <= 0x9F else ""
        what = "a NUL byte" if code == 0 else f"{control}character U+{code:04X}"
        hint = " (is this a binary file?)" if code == 0 else ""
        raise SuiteError(f"{path}:{line}:{column}: {what} is not allowed in YAML; remove it{hint}")
    return text


def _one_line(text: str) -> str:
    return " ".join(text.split())


def parse_yaml(text: str, path: Path) -> object:
    loader = _Loader(text)
    try:
        return loader.get_single_data()
    except _Refused as exc:
        line = f":{exc.problem_mark.line + 1}" if exc.problem_mark else ""
        raise SuiteError(f"{path}{line}: {exc.problem}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        message = _one_line(str(exc.problem or ""))
        if exc.context:
            started = f" that starts on line {exc.context_mark.line + 1}" if exc.context_mark else ""
            message = f"{message} ({_one_line(str(exc.context))}{started})"
        if "<document start>" in message:
            message += "; a suite file is one YAML document: look for a stray '...' line or text after the suite"
        if "maximum nesting depth" in message:
            message += "; a suite needs about 7 levels: check the brackets"
        if exc.context == "while scanning a block scalar":
            message += (
                "; YAML reads a value that starts with '>' or '|' as a block of text: quote it, "
                'e.g. launches: ">= 2x"'
            )
        if "could not determine a constructor" in message:
            message += "; a suite is plain data: tags that build objects (!!python/...) or custom tags are refused"
        raise SuiteError(f"{path}{at}: invalid YAML: {message}") from None
    except yaml.YAMLError as exc:
        raise SuiteError(f"{path}: invalid YAML: {_one_line(str(exc))}") from None
    except RecursionError:
        raise SuiteError(f"{path}: nested too deeply to read; a suite needs about 7 levels") from None
    finally:
        loader.dispose()


def load_yaml(path: Path) -> object:
    """Read and parse one suite file within the limits; mappings are :class:`LineDict`.

    Raises:
        SuiteError: missing, unreadable, too large, not UTF-8, not YAML, or over a limit (names file and line).
    """
    return parse_yaml(read_text(path), path)
