"""A compiled forward's provenance, read from Inductor's structured-trace artifacts as a capture
holds them: ``{"artifacts": [{"name", "metadata", "payload"}, ...], "fusion_log": [...]}``, the
artifacts as a handler on ``torch._logging._internal.trace_log`` receives them and the fusion
log's lines (``torch._logging.set_logs(fusion=True)``).

Per compiled graph (Dynamo's ``frame_id/frame_compile_id``: ``0/0``; a graph break adds ``1/0``,
a recompilation of the same frame ``0/1``): the wrapper's source (``inductor_output_code``), the
node mappings (``inductor_provenance_tracking_node_mappings``: ``cppCodeToPost`` from a call's
debug handle to the post-grad nodes it implements, ``postToPre`` from a post-grad node to its
pre-grad ones), the kernels' stack traces and the post-grad graph's text; for the forward, the
graph-break reasons and the distinct reasons Inductor gave for not fusing two nodes.

What the capture relies on:
    - ``torch._inductor.config.trace.provenance_tracking_level = 1``: without it Inductor writes
      no node mappings, and no call can be traced to its nodes.
    - A fresh Inductor compile (``torch._inductor.config.force_disable_caches = True``, or an
      empty cache): an FX-graph-cache hit loads the compiled module and emits no provenance
      artifacts at all (nor a post-grad graph), so every call would be untraced.
    - ``TORCHINDUCTOR_UNIQUE_KERNEL_NAMES=1`` (the default where Inductor is not asked
      otherwise): each Triton kernel is launched under its own name (``triton_poi_fused_add_view_3``)
      and its NVTX range carries that name, which is how ncu's rows are matched to calls.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fuseci.errors import LedgerError
from fuseci.files.versioned import read_bounded
from fuseci.wording import shown

#: Largest capture file read.
MAX_BYTES = 256 << 20

OUTPUT_CODE = "inductor_output_code"
NODE_MAPPINGS = "inductor_provenance_tracking_node_mappings"
STACK_TRACES = "inductor_provenance_tracking_kernel_stack_traces"
POST_GRAD = "inductor_post_grad_graph"
BREAK_REASON = "dynamo_graph_break_reason"
#: The directories of a source file a reason names (``/home/ci/repo/`` of ``/home/ci/repo/m.py:12``).
_DIRECTORIES = re.compile(r"(?<![\w.])(?:[A-Za-z]:)?[\\/](?:[^\s\\/:]+[\\/])*(?=[^\s\\/:]+\.py\b)")
#: A source file's line number in a reason (``models.py:121``).
_LINE_NUMBER = re.compile(r"(\.py):\d+")

_REFUSAL = re.compile(r"cannot fuse (\S+) with (\S+): (?P<reason>.*)")
_NODE_NUMBER = re.compile(r"\bop\d+(?:_op\d+)*\b")


@dataclass(frozen=True, slots=True)
class CompiledGraph:
    """The provenance of one compiled graph."""

    id: str
    """Dynamo's ``frame_id/frame_compile_id`` (``0/0``)."""
    output_code: str | None = None
    post_grad: str | None = None
    """The post-grad graph's text."""
    calls_to_nodes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """A call's debug handle (``extern_kernels.addmm:2``) → the post-grad nodes it implements."""
    pre_grad: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """A post-grad node → the pre-grad nodes it came from."""
    stack_traces: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """A call's debug handle → the stack traces of what it implements."""
    has_mappings: bool = False
    """Whether Inductor wrote node mappings for it (provenance tracking on, a fresh compile)."""


@dataclass(frozen=True, slots=True)
class Capture:
    """What one compiled forward's capture holds."""

    graphs: tuple[CompiledGraph, ...]
    """In the order they were compiled (a graph break's second graph after the first)."""
    break_reasons: tuple[str, ...] = ()
    fusion_refusals: tuple[str, ...] = ()
    sizes: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """Graph → the value of each of its symbolic sizes in the run (``{"0/0": {"s27": 256}}``):
    the capture's ``sizes``, where the harness recorded them (a graph compiled for dynamic shapes)."""


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise ValueError(f"{what} is {shown(value)}, not a list of strings")
    return tuple(value)


def _string_lists(obj: Mapping[str, Any], key: str, *, required: bool) -> dict[str, tuple[str, ...]]:
    value = obj.get(key)
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{key} is {shown(value)}, not an object of lists of names")
    return {k: _strings(v, f"{key}[{json.dumps(k[:60])}]") for k, v in value.items()}


def _json_payload(payload: str) -> dict[str, Any]:
    try:
        data = json.loads(payload)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"the payload is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"the payload is {shown(data)}, not a JSON object")
    return data


def _name(item: Mapping[str, Any]) -> str:
    """An artifact's name: the item's own, or its metadata's (``artifact.name``, or the one key
    naming it, as ``inductor_output_code`` does)."""
    name = item.get("name")
    meta = item.get("metadata")
    if not isinstance(name, str) and isinstance(meta, dict):
        artifact = meta.get("artifact")
        name = artifact.get("name") if isinstance(artifact, dict) else None
        if not isinstance(name, str):
            name = next((k for k in (OUTPUT_CODE, POST_GRAD) if k in meta), None)
    if not isinstance(name, str):
        raise ValueError("it names no artifact (no 'name', nor one in its metadata)")
    return name


def _graph_id(meta: Any) -> str:
    if not isinstance(meta, dict):
        raise ValueError(f"its metadata is {shown(meta)}, not an object")
    frame, compile_id = meta.get("frame_id"), meta.get("frame_compile_id")
    for key, value in (("frame_id", frame), ("frame_compile_id", compile_id)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"its metadata's {key} is {shown(value)}, not a count")
    return f"{frame}/{compile_id}"


def _graph_with(graph: CompiledGraph, name: str, payload: str) -> CompiledGraph:
    """``graph`` with one artifact's content filled in."""
    if name == OUTPUT_CODE:
        return replace(graph, output_code=payload)
    if name == POST_GRAD:
        return replace(graph, post_grad=payload)
    data = _json_payload(payload)
    if name == NODE_MAPPINGS:
        return replace(
            graph,
            calls_to_nodes=_string_lists(data, "cppCodeToPost", required=True),
            pre_grad=_string_lists(data, "postToPre", required=False),
            has_mappings=True,
        )
    return replace(graph, stack_traces={k: _strings(v, f"[{json.dumps(k[:60])}]") for k, v in data.items()})


def break_reason(text: str) -> str:
    """A graph-break reason on one line: what Dynamo said before the traceback, without its
    link, each source file by its base name (``at models.py:121``: a ledger recorded in one
    checkout then reads as one recorded in another)."""
    head = text.split("User code traceback:")[0]
    kept = [line.strip() for line in head.splitlines() if line.strip() and not line.strip().startswith("For more")]
    return _DIRECTORIES.sub("", " ".join(kept))[:1000]


def reason_key(reason: str) -> str:
    """What a graph-break reason is known by across runs: its files by their base names and
    without line numbers (a line added above the break moves it, and a ledger stored before
    :func:`break_reason` dropped directories still names them)."""
    return _LINE_NUMBER.sub(r"\1", _DIRECTORIES.sub("", reason))


def fusion_refusals(lines: list[str]) -> tuple[str, ...]:
    """The distinct reasons of the fusion log's ``cannot fuse A with B: reason`` lines, node
    numbers stripped (``op12`` → ``opN``), in the order first given."""
    out: dict[str, None] = {}
    for line in lines:
        m = _REFUSAL.search(line)
        if m:
            out[_NODE_NUMBER.sub("opN", m["reason"].strip())] = None
    return tuple(out)


def capture_from(data: Any, where: str) -> Capture:
    """A capture's provenance from its parsed JSON.

    Args:
        data: ``{"artifacts": [...], "fusion_log": [...]}``.
        where: The file, for messages.

    Raises:
        LedgerError: an item, metadata or payload that is not what Inductor writes, naming the
            item and the graph.
    """
    if not isinstance(data, dict) or not isinstance(data.get("artifacts"), list):
        raise LedgerError(
            f"{where}: not a capture of Inductor's artifacts (expected an object with an 'artifacts' list)"
        )
    log = data.get("fusion_log", [])
    if not isinstance(log, list) or not all(isinstance(s, str) for s in log):
        raise LedgerError(f"{where}: fusion_log is {shown(log)}, not a list of the fusion log's lines")
    graphs: dict[str, CompiledGraph] = {}
    reasons: dict[str, None] = {}
    for i, item in enumerate(data["artifacts"]):
        place = f"{where}: artifacts[{i}]"
        try:
            if not isinstance(item, dict):
                raise ValueError(f"it is {shown(item)}, not an object")
            name = _name(item)
            if name not in (OUTPUT_CODE, POST_GRAD, NODE_MAPPINGS, STACK_TRACES, BREAK_REASON):
                continue
            gid = _graph_id(item.get("metadata"))
            place = f"{place} ({name} of graph {gid})"
            payload = item.get("payload")
            if not isinstance(payload, str):
                raise ValueError(f"its payload is {shown(payload)}, not the artifact's text")
            if name == BREAK_REASON:
                reasons[break_reason(payload)] = None
                continue
            graphs[gid] = _graph_with(graphs.get(gid) or CompiledGraph(gid), name, payload)
        except ValueError as exc:
            raise LedgerError(f"{place}: {exc}; capture it again with provenance tracking on") from None
    return Capture(tuple(graphs.values()), tuple(reasons), fusion_refusals(log), _sizes(data.get("sizes"), where))


#: Symbols of one graph a capture's ``sizes`` may hold.
MAX_SYMBOLS = 10_000
_SYMBOL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
_GRAPH_ID = re.compile(r"^\d{1,9}/\d{1,9}$")


def _sizes(raw: Any, where: str) -> dict[str, dict[str, int]]:
    """A capture's ``sizes``: ``{graph id: {symbol: value}}``, each value a size (a count); absent
    in captures recorded before they were kept.

    Raises:
        LedgerError: not of that shape, naming the place.
    """
    if raw is None:
        return {}
    fix = "capture it again (the harness records each symbolic size's value in the run)"
    if not isinstance(raw, dict) or len(raw) > MAX_SYMBOLS:
        raise LedgerError(f"{where}: sizes is {shown(raw)}, not an object of each graph's symbol values; {fix}")
    out: dict[str, dict[str, int]] = {}
    for graph, symbols in raw.items():
        place = f"{where}: sizes[{json.dumps(str(graph)[:60])}]"
        if not _GRAPH_ID.match(graph):
            raise LedgerError(f"{place}: not a graph's id (frame/compile, like 0/0); {fix}")
        if not isinstance(symbols, dict) or len(symbols) > MAX_SYMBOLS:
            raise LedgerError(f"{place} is {shown(symbols)}, not an object of symbol values; {fix}")
        for name, value in symbols.items():
            if not _SYMBOL.match(name):
                raise LedgerError(f"{place}: {shown(name)} is not a symbol's name (s27); {fix}")
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 62:
                raise LedgerError(f"{place}[{json.dumps(name)}] is {shown(value)}, not a size; {fix}")
        out[graph] = dict(symbols)
    return out


def read_capture(path: Path) -> Capture:
    """Read a capture file (see the module docstring).

    Raises:
        LedgerError: unreadable, over :data:`MAX_BYTES`, not JSON, or not a capture.
    """
    try:
        raw = read_bounded(path, MAX_BYTES)
    except OSError as exc:
        raise LedgerError(f"{path}: cannot read the capture: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise LedgerError(f"{path}: over {MAX_BYTES >> 20} MiB, more than a capture of one forward")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise LedgerError(f"{path}: not UTF-8 text (byte {exc.start}), so not a capture") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise LedgerError(f"{path}: not JSON ({exc}), so not a capture") from None
    return capture_from(data, str(path))
