"""Suite files: YAML → frozen dataclasses, validated once, with errors that point at the line.

A suite names a set of cases; each case builds its inputs, runs an ``unfused`` variant and one
or more fused variants (``module:function`` references), checks them against each other and
an optional float64 reference, and states which fusion gains are gated and how tightly.
README.md documents the format with a complete example.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
import yaml.composer
import yaml.constructor
import yaml.parser
import yaml.reader
import yaml.resolver
import yaml.scanner

from fuseci import schema
from fuseci.errors import SuiteError
from fuseci.policy import Expectation, Tolerance, brief_repr, parse_expectation, parse_tolerance

#: The variant every gain is measured against.
BASELINE_VARIANT = "unfused"

DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8")
DISTRIBUTIONS = ("normal", "uniform", "randint")
CLOCK_CONTROLS = ("none", "base")
CACHE_CONTROLS = ("all", "none")
REPLAY_MODES = ("kernel", "application")

#: Default gates: launch counts exact, byte counts tight, times loose, theoretical occupancy
#: (a property of the compiled kernel and its launch) tight. The figures behind these are in
#: docs/BENCHMARKS.md, "Noise study".
DEFAULT_GATES: dict[str, str] = {
    schema.LAUNCHES: "exact",
    schema.DRAM_BYTES: "3%",
    schema.DURATION: "15%",
    schema.EVENT_TIME: "10%",
    schema.OCC_THEORETICAL: "5%",
}

#: Default allowance of a fused variant's DRAM bytes over the case's minimum.
DEFAULT_BYTES_ALLOWANCE = "10%"

#: What a planted variant's ``caught_by`` may name besides a gated quantity (see :class:`Variant`).
CHECK_NAMES = ("correctness", "inventory", "bytes")

_MAX_ELEMENTS = 2**34
_OFF = parse_tolerance("off")


@dataclass(frozen=True, slots=True)
class InputSpec:
    """One input tensor, built on the GPU from a seeded generator."""

    name: str
    """Keyword the variant functions receive it as."""
    shape: tuple[int, ...]
    """Tensor shape."""
    dtype: str
    """NumPy dtype name, one of :data:`DTYPES`."""
    distribution: str
    """``normal`` (mean, std), ``uniform`` (low, high) or ``randint`` (low, high exclusive)."""
    seed: int
    """Generator seed; identical seeds give identical tensors on every run."""
    low: float = 0.0
    """Lower bound for ``uniform`` and ``randint``."""
    high: float = 1.0
    """Upper bound for ``uniform`` and ``randint``."""
    mean: float = 0.0
    """Mean for ``normal``."""
    std: float = 1.0
    """Standard deviation for ``normal``."""

    @property
    def nbytes(self) -> int:
        """Size of the tensor in bytes."""
        import numpy as np

        return math.prod(self.shape) * np.dtype(self.dtype).itemsize


@dataclass(frozen=True, slots=True)
class Correctness:
    """How close a variant's output must be to the unfused output and to the reference."""

    rtol: float = 1e-5
    """Relative tolerance, elementwise: ``|out - ref| <= atol + rtol * |ref|``."""
    atol: float = 1e-6
    """Absolute tolerance."""


@dataclass(frozen=True, slots=True)
class Variant:
    """One implementation of a case."""

    id: str
    """Variant id, used in the NVTX range name."""
    fn: str
    """``module:function`` reference; called with the inputs and params as keyword arguments."""
    expect: Mapping[str, Expectation]
    """Absolute bounds on this variant's fusion gains, by quantity."""
    baseline: str | None = None
    """Judge this variant against the baseline recorded for that variant of the case (a
    candidate rewrite, or a planted regression, against the kernel it would replace)."""
    caught_by: tuple[str, ...] = ()
    """A planted regression: the checks that must catch it (gated quantities, ``correctness``,
    ``inventory``, ``bytes``). Its failures are expected; its verdict is whether they all came."""

    @property
    def judged_as(self) -> str:
        """The variant whose baseline this one is compared with."""
        return self.baseline or self.id


@dataclass(frozen=True, slots=True)
class Case:
    """One fusion pattern: inputs, variants and the policies that judge them."""

    id: str
    """Case id, used in the NVTX range name."""
    description: str
    """One line for reports."""
    inputs: tuple[InputSpec, ...]
    """Tensors passed to every variant (and the reference)."""
    params: Mapping[str, Any]
    """Scalars passed to every variant as keyword arguments."""
    variants: tuple[Variant, ...]
    """``unfused`` first, then the fused variants in file order."""
    reference: str | None
    """Optional ``module:function`` float64 reference (NumPy in, NumPy out)."""
    correctness: Correctness
    """Output tolerances."""
    gates: Mapping[str, Tolerance]
    """Tolerance of each gated fusion gain against its baseline, by quantity."""
    line: int
    """Line of the case in the suite file (1-based), for messages and annotations."""
    bytes_allowance: Tolerance = field(default_factory=lambda: parse_tolerance(DEFAULT_BYTES_ALLOWANCE))
    """How far above :attr:`min_bytes` a fused variant's DRAM bytes may be (``off``: not checked)."""
    min_bytes: int | None = None
    """The case's minimum DRAM traffic in bytes when the suite states it; None: the harness
    derives it (every input read once, every ``unfused`` output written once)."""

    def variant(self, variant_id: str) -> Variant:
        """The variant with this id.

        Raises:
            KeyError: no such variant.
        """
        for v in self.variants:
            if v.id == variant_id:
                return v
        raise KeyError(variant_id)

    @property
    def fused_variants(self) -> tuple[Variant, ...]:
        """Every variant except ``unfused``."""
        return tuple(v for v in self.variants if v.id != BASELINE_VARIANT)


@dataclass(frozen=True, slots=True)
class NcuSettings:
    """How ncu profiles the suite; recorded in the environment fingerprint."""

    clock_control: str = "none"
    """``none``: clocks as the card runs them; ``base``: ncu locks base clocks while profiling."""
    cache_control: str = "all"
    """``all``: flush caches before every kernel (reproducible bytes); ``none``: keep them."""
    replay_mode: str = "kernel"
    """``kernel`` or ``application`` replay."""
    timeout_s: float = 1800.0
    """Wall-clock limit for the whole profiled run."""


@dataclass(frozen=True, slots=True)
class Suite:
    """A parsed, validated suite file."""

    name: str
    """Suite id, used in range names and baseline file names."""
    path: Path
    """The file it was loaded from."""
    description: str
    """One line for reports."""
    cases: tuple[Case, ...]
    """Cases in file order."""
    ncu: NcuSettings = field(default_factory=NcuSettings)
    """Profiler settings."""
    planted: bool = False
    """A suite of planted regressions (variants with ``caught_by``) that proves the gates catch
    them; ``fuseci run`` without suite arguments skips it."""

    @property
    def timed(self) -> bool:
        """True when any case gates the CUDA-event speedup, so ``fuseci run`` times the suite."""
        return any(c.gates.get(schema.EVENT_TIME, _OFF).enabled for c in self.cases)

    def case(self, case_id: str) -> Case:
        """The case with this id.

        Raises:
            KeyError: no such case.
        """
        for c in self.cases:
            if c.id == case_id:
                return c
        raise KeyError(case_id)


# --- loading -------------------------------------------------------------------------------
#
# A suite names code to run, so it is trusted as code is (README, "Trust model"). A malformed,
# truncated or hostile file must still fail with a one-line message that names the file, the
# line and the fix, in bounded time and memory, and without running anything: no Python
# objects are constructed, nothing is imported, and the limits below cap the work.

#: Largest suite file read; the shipped suites are a few KiB.
MAX_FILE_BYTES = 1 << 20
#: Most YAML nodes in a document, counting every alias as a copy of what it names: what any
#: walk of the loaded data visits. SafeLoader shares aliased objects, so an alias bomb is small
#: in memory, but a walk of it (a repr, a check, a schema validator) is exponential.
MAX_NODES = 100_000
#: Deepest nesting of mappings and lists; a suite needs about 7 levels.
MAX_DEPTH = 64
#: Longest integer literal; turning a long one into an int is quadratic (or refused by Python).
MAX_INT_CHARS = 64
#: Most dimensions of an input tensor.
MAX_DIMS = 32

#: The JSON Schema of suite files, for editors and other tools (installed with the package).
SCHEMA_FILE = Path(__file__).with_name("suite.schema.json")

_MERGE_TAG = "tag:yaml.org,2002:merge"

# What YAML itself allows in a stream (PyYAML's Reader uses the same set); checked up front to
# say where the offending character is.
_NOT_YAML_CHARS = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


class _LineDict(dict[str, Any]):
    """A mapping that remembers the line it started on."""

    line: int = 0


class _Refused(yaml.MarkedYAMLError):
    """A document the loader will not build: over a limit, or a key it cannot take."""


class _BoundedComposer(yaml.composer.Composer, yaml.constructor.SafeConstructor):
    """Composes nodes like PyYAML's composer, counting them and their depth as it goes.

    Each alias counts as many nodes as the node it names holds (its *expanded* size), so the
    count is what a walk of the loaded data would visit; composing stops at :data:`MAX_NODES`
    or :data:`MAX_DEPTH`, before a bomb is built or a deep document overflows the stack.
    Constructs like SafeLoader. The loaders below add a parser.
    """

    if TYPE_CHECKING:  # provided by the parser each loader mixes in

        def get_event(self) -> Any: ...
        def peek_event(self) -> Any: ...
        def check_event(self, *choices: Any) -> bool: ...
        def dispose(self) -> None: ...

    def _init_limits(self) -> None:
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
                None,
                None,
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
                None,
                None,
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
                    None,
                    None,
                    f"alias *{event.anchor} is used inside the value it names (a recursive structure); "
                    "write the value out instead",
                    event.start_mark,
                )
            self._aliases += 1
            self._count(size or 0, event.start_mark)  # an undefined alias is reported by the base class
            return super().compose_node(parent, index)
        if self._depth >= MAX_DEPTH:
            raise _Refused(
                None,
                None,
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


class _PyLoader(_BoundedComposer, yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, yaml.resolver.Resolver):
    """SafeLoader with the limits of :class:`_BoundedComposer`, on PyYAML's pure-Python parser."""

    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self._init_limits()


_Loader: Any = _PyLoader
if yaml.__with_libyaml__:
    from yaml._yaml import CParser

    class _CLoader(_BoundedComposer, CParser, yaml.resolver.Resolver):
        """The same on libyaml's parser (four times faster); composing stays ours, for the limits."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            yaml.composer.Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
            self._init_limits()

    _Loader = _CLoader


def _construct_mapping(loader: _BoundedComposer, node: Any) -> _LineDict:
    if not isinstance(node, yaml.MappingNode):
        raise _Refused(None, None, f"a value tagged {_short_tag(node.tag)} must be a mapping", node.start_mark)
    loader.flatten_mapping(node)
    explicit = loader._explicit.get(id(node), set())
    written: set[object] = set()
    out = _LineDict()
    out.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise _Refused(
                None, None, f"a mapping key must be a plain value, not a {_kind(key)}", key_node.start_mark
            ) from None
        if id(key_node) in explicit:
            if key in written:
                raise _Refused(
                    None,
                    None,
                    f"key {brief_repr(key)} appears twice in one mapping; keep one of them",
                    key_node.start_mark,
                )
            written.add(key)
        out[key] = loader.construct_object(value_node, deep=True)
    return out


def _construct_int(loader: _BoundedComposer, node: Any) -> Any:
    if isinstance(node, yaml.ScalarNode) and len(node.value) > MAX_INT_CHARS:
        raise _Refused(
            None,
            None,
            f"an integer of {len(node.value)} characters; numbers in a suite need at most {MAX_INT_CHARS}",
            node.start_mark,
        )
    return loader.construct_yaml_int(node)


def _guarded(construct: Any) -> Any:
    """Wrap a scalar constructor so that a value it cannot read is a located YAML error.

    PyYAML's own constructors raise ValueError, KeyError and the like for ``!!bool maybe``,
    ``!!int x`` or the date ``2024-13-01``.
    """

    def guarded(loader: _BoundedComposer, node: Any) -> Any:
        try:
            return construct(loader, node)
        except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError):
            raise _Refused(
                None,
                None,
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


_register_constructors(_PyLoader)
_register_constructors(_Loader)


def _short_tag(tag: str) -> str:
    return tag.replace("tag:yaml.org,2002:", "!!")


def _kind(value: object) -> str:
    """What a YAML reader would call the type of a loaded value."""
    if isinstance(value, bool):
        return "boolean"
    for cls, name in ((dict, "mapping"), (list, "list"), (str, "string"), (int, "integer"), (float, "number")):
        if isinstance(value, cls):
            return name
    return "null" if value is None else type(value).__name__


def _read_text(path: Path) -> str:
    try:
        with path.open("rb") as f:
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
        if code == 0:
            what, hint = "a NUL byte", " (is this a binary file?)"
        elif code < 0x20 or 0x7F <= code <= 0x9F:
            what, hint = f"control character U+{code:04X}", ""
        else:
            what, hint = f"character U+{code:04X}", ""
        raise SuiteError(f"{path}:{line}:{column}: {what} is not allowed in YAML; remove it{hint}")
    return text


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _load_yaml(text: str, path: Path) -> object:
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
        if "could not determine a constructor" in message:
            message += "; a suite is plain data: tags that build objects (!!python/...) or custom tags are refused"
        raise SuiteError(f"{path}{at}: invalid YAML: {message}") from None
    except yaml.YAMLError as exc:
        raise SuiteError(f"{path}: invalid YAML: {_one_line(str(exc))}") from None
    except RecursionError:
        raise SuiteError(f"{path}: nested too deeply to read; a suite needs about 7 levels") from None
    finally:
        loader.dispose()


# --- validation ----------------------------------------------------------------------------

_SIMPLE_KEY = re.compile(r"^[A-Za-z0-9_.\-]{1,80}$")

#: What each required key looks like, for "missing required key" messages.
_EXAMPLES = {
    "suite": "suite: mylib",
    "cases": "cases: [{id: ..., inputs: ..., variants: ...}]",
    "id": "id: my_case",
    "inputs": "inputs: {x: {shape: [67108864]}}",
    "variants": "variants: {unfused: mylib.ops:f_unfused, fused: mylib.fused:f}",
    "shape": "shape: [67108864]",
    "fn": "fn: mylib.fused:f",
}


def _sub(where: str, key: object) -> str:
    """The field path of ``key`` under ``where``: ``a.b`` for plain keys, ``a[...]`` otherwise."""
    if isinstance(key, str) and _SIMPLE_KEY.match(key):
        return f"{where}.{key}"
    return f"{where}[{brief_repr(key)}]"


def _did_you_mean(value: object, options: tuple[str, ...]) -> str:
    if not isinstance(value, str) or len(value) > 100:
        return ""
    close = difflib.get_close_matches(value, options, n=1)
    return f"did you mean {close[0]!r}? " if close else ""


class _Where:
    """Builds messages that name the file, the line and the field path."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def error(self, where: str, message: str, node: object = None) -> SuiteError:
        line = getattr(node, "line", 0)
        at = f"{self.path}:{line}" if line else str(self.path)
        return SuiteError(f"{at}: {where}: {message}")


def _check_keys(
    w: _Where, where: str, node: Mapping[str, Any], allowed: tuple[str, ...], required: tuple[str, ...] = ()
) -> None:
    for key in node:
        if key not in allowed:
            hint = _did_you_mean(key, allowed)
            raise w.error(where, f"unknown key {brief_repr(key)}; {hint}allowed keys: {', '.join(allowed)}", node)
    for key in required:
        if key not in node:
            example = f" (e.g. {_EXAMPLES[key]})" if key in _EXAMPLES else ""
            raise w.error(where, f"missing required key {key!r}{example}", node)


def _mapping(w: _Where, where: str, value: object, parent: object = None) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise w.error(where, f"expected a mapping, got {_kind(value)} {brief_repr(value)}", parent)
    return value


def _optional_mapping(w: _Where, where: str, value: object, parent: object) -> Mapping[str, Any]:
    """A mapping that may be left empty (``key:`` alone is YAML's null)."""
    return {} if value is None else _mapping(w, where, value, parent)


def _text(w: _Where, where: str, value: object, node: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        quote = "; quote it" if isinstance(value, (int, float)) else ""
        raise w.error(where, f"expected a string, got {_kind(value)} {brief_repr(value)}{quote}", node)
    return value


def _choice(w: _Where, where: str, value: object, choices: tuple[str, ...], node: object, what: str) -> str:
    if isinstance(value, str) and value in choices:
        return value
    raise w.error(
        where,
        f"{what} {brief_repr(value)}; {_did_you_mean(value, choices)}choose one of {', '.join(choices)}",
        node,
    )


def _check_id(w: _Where, where: str, value: object, node: object) -> str:
    if not isinstance(value, str) or not schema.ID_PATTERN.match(value):
        raise w.error(
            where,
            f"{brief_repr(value)} is not a valid id: use letters, digits, '_' and '-' only "
            "(ncu's NVTX filter treats '/' and ':' specially)",
            node,
        )
    return value


def _check_ref(w: _Where, where: str, value: object, node: object) -> str:
    if (
        not isinstance(value, str)
        or value.count(":") != 1
        or not all(part and all(p.isidentifier() for p in part.split(".")) for part in value.split(":"))
    ):
        raise w.error(
            where,
            f"{brief_repr(value)} is not a 'module:function' reference (e.g. 'kernels.elementwise:fused')",
            node,
        )
    return value


def _number(w: _Where, where: str, value: object, node: object, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise w.error(where, f"expected a finite number, got {_kind(value)} {brief_repr(value)}", node)
    if positive and value <= 0:
        raise w.error(where, f"must be positive, got {brief_repr(value)}", node)
    return float(value)


def _seed(w: _Where, where: str, value: object, node: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise w.error(where, f"expected a non-negative integer, got {_kind(value)} {brief_repr(value)}", node)
    return value


def _seed_for(base: int, case_id: str, name: str) -> int:
    """A stable per-tensor seed, so that inputs of one case differ but never change run to run."""
    return (base * 1_000_003 + zlib.crc32(f"{case_id}/{name}".encode())) % 2**63


def _shape(w: _Where, where: str, raw: object, node: object) -> tuple[int, ...]:
    dims = [raw] if isinstance(raw, int) and not isinstance(raw, bool) else raw
    if (
        not isinstance(dims, list)
        or not dims
        or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims)
    ):
        raise w.error(where, f"expected a list of positive integers (or one), got {_kind(raw)} {brief_repr(raw)}", node)
    if len(dims) > MAX_DIMS:
        raise w.error(where, f"{len(dims)} dimensions; a tensor has at most {MAX_DIMS}", node)
    elements = 1
    for d in dims:
        elements *= d
        if elements > _MAX_ELEMENTS:
            raise w.error(
                where,
                f"{brief_repr(raw)} has more than {_MAX_ELEMENTS} elements (2**34), more than any GPU holds",
                node,
            )
    return tuple(dims)


_INPUT_KEYS = ("shape", "dtype", "distribution", "seed", "low", "high", "mean", "std")


def _parse_input(
    w: _Where, where: str, name: str, raw: object, defaults: Mapping[str, Any], case_id: str, parent: object
) -> InputSpec:
    if not isinstance(name, str) or not name.isidentifier():
        raise w.error(
            where, f"input name {brief_repr(name)} must be a Python identifier (it is passed as a keyword)", parent
        )
    node = _mapping(w, where, raw, parent)
    _check_keys(w, where, node, _INPUT_KEYS, ("shape",))
    shape = _shape(w, f"{where}.shape", node["shape"], node)
    dtype = _choice(w, f"{where}.dtype", node.get("dtype", defaults["dtype"]), DTYPES, node, "unsupported dtype")
    dist = _choice(
        w,
        f"{where}.distribution",
        node.get("distribution", defaults["distribution"]),
        DISTRIBUTIONS,
        node,
        "unknown distribution",
    )
    seed = _seed(w, f"{where}.seed", node.get("seed", defaults["seed"]), node)
    nums = {k: _number(w, f"{where}.{k}", node[k], node) for k in ("low", "high", "mean", "std") if k in node}
    spec = InputSpec(
        name=name, shape=shape, dtype=dtype, distribution=dist, seed=_seed_for(seed, case_id, name), **nums
    )
    if dist in ("uniform", "randint") and not spec.low < spec.high:
        raise w.error(where, f"low ({spec.low:g}) must be below high ({spec.high:g}) for {dist}", node)
    if dist == "normal" and spec.std <= 0:
        raise w.error(f"{where}.std", f"must be positive for a normal distribution, got {spec.std:g}", node)
    return spec


def _parse_gates(
    w: _Where, where: str, raw: object, parent: object, base: Mapping[str, Tolerance]
) -> dict[str, Tolerance]:
    gates = dict(base)
    if raw is None:
        return gates
    node = _mapping(w, where, raw, parent)
    for key, text in node.items():
        if key not in schema.GATEABLE:
            hint = _did_you_mean(key, schema.GATEABLE)
            raise w.error(where, f"cannot gate {brief_repr(key)}; {hint}gateable: {', '.join(schema.GATEABLE)}", node)
        try:
            gates[key] = parse_tolerance(text)
        except ValueError as exc:
            raise w.error(f"{where}.{key}", str(exc), node) from None
    return gates


def _parse_expect(w: _Where, where: str, raw: object, parent: object) -> dict[str, Expectation]:
    if raw is None:
        return {}
    node = _mapping(w, where, raw, parent)
    out: dict[str, Expectation] = {}
    for key, text in node.items():
        if key not in schema.GAIN_GATEABLE:
            hint = _did_you_mean(key, schema.GAIN_GATEABLE)
            raise w.error(
                where,
                f"no gain named {brief_repr(key)}; {hint}expectations apply to: {', '.join(schema.GAIN_GATEABLE)}",
                node,
            )
        try:
            out[key] = parse_expectation(text)
        except ValueError as exc:
            raise w.error(f"{where}.{key}", str(exc), node) from None
    return out


def _parse_correctness(w: _Where, where: str, raw: object, parent: object, base: Correctness) -> Correctness:
    if raw is None:
        return base
    node = _mapping(w, where, raw, parent)
    _check_keys(w, where, node, ("rtol", "atol"))
    tols = {k: _number(w, f"{where}.{k}", node.get(k, getattr(base, k)), node) for k in ("rtol", "atol")}
    for key, value in tols.items():
        if value < 0:
            raise w.error(f"{where}.{key}", f"must be a non-negative number, got {value:g}", node)
    return Correctness(**tols)


def _parse_variants(
    w: _Where, where: str, raw: object, parent: object, case_expect: Mapping[str, Expectation]
) -> tuple[Variant, ...]:
    node = _mapping(w, where, raw, parent)
    variants: list[Variant] = []
    for vid, spec in node.items():
        vwhere = _sub(where, vid)
        _check_id(w, vwhere, vid, node)
        judged_as: str | None = None
        caught_by: tuple[str, ...] = ()
        if isinstance(spec, str):
            fn, expect = _check_ref(w, vwhere, spec, node), {}
        elif isinstance(spec, dict):
            _check_keys(w, vwhere, spec, ("fn", "expect", "baseline", "caught_by"), ("fn",))
            fn = _check_ref(w, f"{vwhere}.fn", spec["fn"], spec)
            expect = _parse_expect(w, f"{vwhere}.expect", spec.get("expect"), spec)
            if "baseline" in spec:
                judged_as = _parse_judged_as(w, f"{vwhere}.baseline", spec["baseline"], spec, vid, node)
            if "caught_by" in spec:
                caught_by = _parse_caught_by(w, f"{vwhere}.caught_by", spec["caught_by"], spec)
        else:
            raise w.error(
                vwhere,
                f"expected a 'module:function' string or a mapping {{fn: ..., expect: ...}}, "
                f"got {_kind(spec)} {brief_repr(spec)}",
                node,
            )
        if vid != BASELINE_VARIANT:
            expect = {**case_expect, **expect}
        elif expect:
            raise w.error(vwhere, "the unfused variant has no fusion gain to expect anything of", node)
        elif judged_as or caught_by:
            raise w.error(
                vwhere,
                "the unfused variant is what every gain is measured against: it takes no baseline or caught_by",
                node,
            )
        variants.append(Variant(id=vid, fn=fn, expect=expect, baseline=judged_as, caught_by=caught_by))
    if BASELINE_VARIANT not in node:
        raise w.error(
            where, f"missing the {BASELINE_VARIANT!r} variant that every fusion gain is measured against", node
        )
    if len(variants) < 2:
        raise w.error(where, f"needs at least one fused variant besides {BASELINE_VARIANT!r}", node)
    for v in variants:
        target = node.get(v.baseline) if v.baseline is not None else None
        if v.baseline is not None and (target is None or (isinstance(target, dict) and "baseline" in target)):
            why = "is not a variant of this case" if target is None else "is itself judged against another's baseline"
            raise w.error(
                _sub(_sub(where, v.id), "baseline"),
                f"{brief_repr(v.baseline)} {why}; name a variant of this case that has its own baseline",
                node,
            )
    variants.sort(key=lambda v: v.id != BASELINE_VARIANT)
    return tuple(variants)


def _parse_judged_as(w: _Where, where: str, raw: object, parent: object, vid: str, variants: object) -> str:
    if not isinstance(raw, str) or not schema.ID_PATTERN.match(raw) or raw in (vid, BASELINE_VARIANT):
        raise w.error(
            where,
            f"expected the id of another fused variant of this case, got {_kind(raw)} {brief_repr(raw)}",
            parent,
        )
    return raw


def _parse_caught_by(w: _Where, where: str, raw: object, parent: object) -> tuple[str, ...]:
    names = [raw] if isinstance(raw, str) else raw
    allowed = (*CHECK_NAMES, *schema.GATEABLE)
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise w.error(where, f"expected a check name or a list of them, got {_kind(raw)} {brief_repr(raw)}", parent)
    for n in names:
        if n not in allowed:
            hint = _did_you_mean(n, allowed)
            raise w.error(where, f"no check named {brief_repr(n)}; {hint}checks: {', '.join(allowed)}", parent)
    return tuple(dict.fromkeys(names))


def _parse_params(w: _Where, where: str, raw: object, node: object, inputs: Mapping[str, Any]) -> dict[str, Any]:
    params = dict(_optional_mapping(w, where, raw, node))
    for key, value in params.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise w.error(where, f"param name {brief_repr(key)} must be a Python identifier", node)
        if not isinstance(value, (int, float, str, bool)):
            raise w.error(
                _sub(where, key),
                f"expected a scalar (number, string or boolean), got {_kind(value)} {brief_repr(value)}",
                node,
            )
    clash = sorted(set(params) & set(inputs))
    if clash:
        raise w.error(where, f"{clash} also named as inputs; rename the param or the input", node)
    return params


_CASE_KEYS = (
    "id", "description", "inputs", "params", "reference", "variants", "correctness", "gates", "expect",
    "bytes_allowance", "min_bytes",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Defaults:
    """The suite's ``defaults:``, validated, for its cases to inherit."""

    inputs: Mapping[str, Any]
    gates: Mapping[str, Tolerance]
    correctness: Correctness
    expect: Mapping[str, Expectation]
    bytes_allowance: Tolerance


def _parse_allowance(w: _Where, where: str, raw: object, parent: object) -> Tolerance:
    try:
        return parse_tolerance(raw)
    except ValueError as exc:
        raise w.error(
            where, f"{exc} (the allowance over the minimum DRAM bytes, e.g. '10%', or 'off')", parent
        ) from None


def _parse_defaults(w: _Where, raw: object, parent: object) -> _Defaults:
    node = _optional_mapping(w, "defaults", raw, parent)
    _check_keys(
        w, "defaults", node, ("dtype", "distribution", "seed", "correctness", "gates", "expect", "bytes_allowance")
    )
    inputs = {
        "dtype": _choice(w, "defaults.dtype", node.get("dtype", "float32"), DTYPES, node, "unsupported dtype"),
        "distribution": _choice(
            w, "defaults.distribution", node.get("distribution", "normal"), DISTRIBUTIONS, node, "unknown distribution"
        ),
        "seed": _seed(w, "defaults.seed", node.get("seed", 0), node),
    }
    builtin_gates = {k: parse_tolerance(v) for k, v in DEFAULT_GATES.items()}
    return _Defaults(
        inputs=inputs,
        gates=_parse_gates(w, "defaults.gates", node.get("gates"), node, builtin_gates),
        correctness=_parse_correctness(w, "defaults.correctness", node.get("correctness"), node, Correctness()),
        expect=_parse_expect(w, "defaults.expect", node.get("expect"), node),
        bytes_allowance=_parse_allowance(
            w, "defaults.bytes_allowance", node.get("bytes_allowance", DEFAULT_BYTES_ALLOWANCE), node
        ),
    )


def _parse_case(w: _Where, index: int, raw: object, parent: object, defaults: _Defaults) -> Case:
    where = f"cases[{index}]"
    node = _mapping(w, where, raw, parent)
    _check_keys(w, where, node, _CASE_KEYS, ("id", "inputs", "variants"))
    case_id = _check_id(w, f"{where}.id", node["id"], node)
    where = f"case {brief_repr(case_id)}"
    inputs_node = _mapping(w, f"{where}.inputs", node["inputs"], node)
    if not inputs_node:
        raise w.error(f"{where}.inputs", "a case needs at least one input", node)
    inputs = tuple(
        _parse_input(w, _sub(f"{where}.inputs", n), n, spec, defaults.inputs, case_id, inputs_node)
        for n, spec in inputs_node.items()
    )
    params = _parse_params(w, f"{where}.params", node.get("params"), node, inputs_node)
    reference = node.get("reference")
    if reference is not None:
        reference = _check_ref(w, f"{where}.reference", reference, node)
    expect = {**defaults.expect, **_parse_expect(w, f"{where}.expect", node.get("expect"), node)}
    return Case(
        id=case_id,
        description=_text(w, f"{where}.description", node.get("description"), node),
        inputs=inputs,
        params=params,
        variants=_parse_variants(w, f"{where}.variants", node["variants"], node, expect),
        reference=reference,
        correctness=_parse_correctness(w, f"{where}.correctness", node.get("correctness"), node, defaults.correctness),
        gates=_parse_gates(w, f"{where}.gates", node.get("gates"), node, defaults.gates),
        line=getattr(node, "line", 0),
        bytes_allowance=_parse_allowance(w, f"{where}.bytes_allowance", node["bytes_allowance"], node)
        if "bytes_allowance" in node
        else defaults.bytes_allowance,
        min_bytes=_seed(w, f"{where}.min_bytes", node["min_bytes"], node) if "min_bytes" in node else None,
    )


def _parse_ncu(w: _Where, raw: object, parent: object) -> NcuSettings:
    node = _optional_mapping(w, "ncu", raw, parent)
    _check_keys(w, "ncu", node, ("clock_control", "cache_control", "replay_mode", "timeout"))
    base = NcuSettings()
    chosen = {
        key: _choice(w, f"ncu.{key}", node.get(key, getattr(base, key)), choices, node, "unknown setting")
        for key, choices in (
            ("clock_control", CLOCK_CONTROLS),
            ("cache_control", CACHE_CONTROLS),
            ("replay_mode", REPLAY_MODES),
        )
    }
    return NcuSettings(
        **chosen,
        timeout_s=_number(w, "ncu.timeout", node.get("timeout", base.timeout_s), node, positive=True),
    )


_TOP_KEYS = ("suite", "description", "defaults", "ncu", "cases", "planted")


def parse_suite(data: object, path: Path) -> Suite:
    """Validate an already-loaded YAML document.

    Raises:
        SuiteError: with the file, line and field path of the first problem.
    """
    w = _Where(path)
    if not isinstance(data, dict):
        raise w.error(
            "top level",
            f"expected a mapping with the keys 'suite' and 'cases', got {_kind(data)} {brief_repr(data)}; "
            "see README.md, 'Writing a suite'",
        )
    root: Mapping[str, Any] = data
    _check_keys(w, "top level", root, _TOP_KEYS, ("suite", "cases"))
    name = _check_id(w, "suite", root["suite"], root)
    defaults = _parse_defaults(w, root.get("defaults"), root)
    cases_raw = root["cases"]
    if not isinstance(cases_raw, list) or not cases_raw:
        raise w.error(
            "cases", f"expected a non-empty list of cases, got {_kind(cases_raw)} {brief_repr(cases_raw)}", root
        )
    cases = [_parse_case(w, i, c, root, defaults) for i, c in enumerate(cases_raw)]
    seen: dict[str, int] = {}
    for c in cases:
        if c.id in seen:
            raise w.error(
                f"case {brief_repr(c.id)}", f"duplicate case id (first defined on line {seen[c.id]}); rename one", c
            )
        seen[c.id] = c.line
    return Suite(
        name=name,
        path=path,
        description=_text(w, "description", root.get("description"), root),
        cases=tuple(cases),
        ncu=_parse_ncu(w, root.get("ncu"), root),
        planted=_flag(w, "planted", root.get("planted", False), root),
    )


def _flag(w: _Where, where: str, value: object, node: object) -> bool:
    if not isinstance(value, bool):
        raise w.error(where, f"expected true or false, got {_kind(value)} {brief_repr(value)}", node)
    return value


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file.

    Reading is bounded (:data:`MAX_FILE_BYTES`, :data:`MAX_NODES`, :data:`MAX_DEPTH`) and safe:
    no Python objects are constructed and no function the suite names is imported.

    Raises:
        SuiteError: the file is missing, unreadable, too large, not UTF-8 YAML, or fails
            validation; the one-line message names the file, the line where known, and the fix.
    """
    path = Path(path)
    data = _load_yaml(_read_text(path), path)
    if data is None:
        raise SuiteError(f"{path}: the suite file is empty; see README.md for the format")
    return parse_suite(data, path)
