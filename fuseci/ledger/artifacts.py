"""A compiled forward's provenance per compiled graph (``0/0``), from a capture's Inductor structured-trace artifacts
and fusion log: the wrapper's source, node mappings (debug handle → post-grad nodes → pre-grad ones), stack traces,
the post-grad graph; the forward's graph-break and not-fused reasons. It needs provenance tracking and a fresh compile
(a cache hit emits none): :mod:`fuseci.harness.arrays.inductor` captures it so."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from fuseci.records.fusion import (
    BREAK_REASON,
    NODE_MAPPINGS,
    OUTPUT_CODE,
    POST_GRAD,
    STACK_TRACES,
    Artifact,
    Provenance,
)

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


def _graph_with(graph: CompiledGraph, artifact: Artifact) -> CompiledGraph:
    """``graph`` with one artifact's content filled in (its payload checked where the record was
    read: :class:`~fuseci.records.fusion.Provenance`)."""
    if artifact.name == OUTPUT_CODE:
        return replace(graph, output_code=artifact.payload)
    if artifact.name == POST_GRAD:
        return replace(graph, post_grad=artifact.payload)
    data = json.loads(artifact.payload)
    if artifact.name == NODE_MAPPINGS:
        return replace(
            graph,
            calls_to_nodes={k: tuple(x) for k, x in data["cppCodeToPost"].items()},
            pre_grad={k: tuple(x) for k, x in data.get("postToPre", {}).items()},
            has_mappings=True,
        )
    return replace(graph, stack_traces={k: tuple(x) for k, x in data.items()})


def break_reason(text: str) -> str:
    """A graph-break reason on one line: what Dynamo said before the traceback, without its
    link, each source file by its base name (``at models.py:121``)."""
    head = text.split("User code traceback:")[0]
    kept = [line.strip() for line in head.splitlines() if line.strip() and not line.strip().startswith("For more")]
    return _DIRECTORIES.sub("", " ".join(kept))[:1000]


def reason_key(reason: str) -> str:
    """What a graph-break reason is known by across runs: its files by their base names, without
    line numbers."""
    return _LINE_NUMBER.sub(r"\1", _DIRECTORIES.sub("", reason))


def fusion_refusals(lines: Iterable[str]) -> tuple[str, ...]:
    """The distinct reasons of the fusion log's ``cannot fuse A with B: reason`` lines, node
    numbers stripped (``op12`` → ``opN``), in the order first given."""
    out: dict[str, None] = {}
    for line in lines:
        m = _REFUSAL.search(line)
        if m:
            out[_NODE_NUMBER.sub("opN", m["reason"].strip())] = None
    return tuple(out)


def capture(provenance: Provenance) -> Capture:
    """What a variant's provenance holds, per compiled graph (see the module docstring)."""
    graphs: dict[str, CompiledGraph] = {}
    reasons: dict[str, None] = {}
    for artifact in provenance.artifacts:
        if artifact.name == BREAK_REASON:
            reasons[break_reason(artifact.payload)] = None
        elif artifact.name in (OUTPUT_CODE, POST_GRAD, NODE_MAPPINGS, STACK_TRACES):
            gid = artifact.graph
            graphs[gid] = _graph_with(graphs.get(gid) or CompiledGraph(gid), artifact)
    return Capture(tuple(graphs.values()), tuple(reasons), fusion_refusals(provenance.fusion_log), provenance.sizes)
