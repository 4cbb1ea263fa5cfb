"""Inductor's provenance of a ledger variant's compiled forward, captured in the process that
compiles it (:func:`capturing`: provenance tracking on, caches off, the structured trace and the
fusion log kept), and the NVTX ranges that tie each measured kernel to its wrapper call
(:func:`op_ranges`); :mod:`fuseci.ledger` builds the ledger from both."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fuseci.records.fusion import ARTIFACTS, Artifact, Provenance

#: Fusion-log lines kept at most (the reasons are deduplicated when the ledger is built).
MAX_FUSION_LINES = 20_000

log = logging.getLogger(__name__)


def _name(metadata: Any) -> str | None:
    if not isinstance(metadata, dict):
        return None
    artifact = metadata.get("artifact")
    if isinstance(artifact, dict) and isinstance(artifact.get("name"), str):
        return str(artifact["name"])
    return next((k for k in metadata if k in ARTIFACTS), None)


class _Trace(logging.Handler):
    """Keeps the artifacts of Inductor's structured trace that the ledger reads, and each symbolic
    size's value by graph (``{"0/0": {"s27": 256}}``)."""

    def __init__(self, into: list[Artifact], sizes: dict[str, dict[str, int]]) -> None:
        super().__init__(logging.DEBUG)
        self.into = into
        self.sizes = sizes

    def emit(self, record: logging.LogRecord) -> None:
        extra = vars(record)  # what the trace log's call gave: its metadata and payload
        metadata = extra.get("metadata")
        if isinstance(metadata, dict) and isinstance(metadata.get("create_symbol"), dict):
            self._symbol(metadata)
            return
        name = _name(metadata)
        if name is not None and name in ARTIFACTS:  # checked where the record is read
            payload: Any = extra.get("payload")  # the artifact's text, as Inductor gave it
            self.into.append(Artifact(name, extra["metadata"], payload))

    def _symbol(self, metadata: dict[str, Any]) -> None:
        event, frame, compile_id = metadata["create_symbol"], metadata.get("frame_id"), metadata.get("frame_compile_id")
        symbol, value = event.get("symbol"), str(event.get("val", ""))
        if isinstance(frame, int) and isinstance(compile_id, int) and isinstance(symbol, str) and value.isdigit():
            self.sizes.setdefault(f"{frame}/{compile_id}", {})[symbol] = int(value)


class _Lines(logging.Handler):
    """Keeps the fusion log's lines."""

    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.into) < MAX_FUSION_LINES:
            try:
                self.into.append(record.getMessage())
            except Exception:  # a log record whose arguments do not format: not ours to fix
                log.debug("an unformattable fusion log record", exc_info=True)


@contextmanager
def capturing(into: dict[str, Provenance], variant: str) -> Iterator[None]:
    """Capture the provenance of what ``torch.compile`` compiles while the block runs into ``into[variant]``."""
    import torch
    import torch._inductor.config as inductor_config
    import torch._logging._internal as logging_internal

    artifacts: list[Artifact] = []
    lines: list[str] = []
    sizes: dict[str, dict[str, int]] = {}
    trace_log = logging_internal.trace_log
    trace, fusion = _Trace(artifacts, sizes), _Lines(lines)
    scheduler = logging.getLogger("torch._inductor.scheduler")
    saved = (trace_log.level, trace_log.propagate)
    with contextlib.ExitStack() as stack:
        stack.enter_context(
            inductor_config.patch(
                {
                    "trace.provenance_tracking_level": 1,
                    "triton.unique_kernel_names": True,
                    "fx_graph_cache": False,
                    "fx_graph_remote_cache": False,
                }
            )
        )
        functorch = getattr(getattr(torch, "_functorch", None), "config", None)
        if functorch is not None and hasattr(functorch, "enable_autograd_cache"):
            stack.enter_context(functorch.patch(enable_autograd_cache=False))
        trace_log.addHandler(trace)
        trace_log.setLevel(logging.DEBUG)
        trace_log.propagate = False
        scheduler.addHandler(fusion)
        try:
            torch._logging.set_logs(fusion=True)
        except Exception:  # TORCH_LOGS set by the user wins; the refusals are then not captured
            log.debug("the fusion log could not be turned on", exc_info=True)
        try:
            yield
        finally:
            trace_log.removeHandler(trace)
            trace_log.setLevel(saved[0])
            trace_log.propagate = saved[1]
            scheduler.removeHandler(fusion)
            with contextlib.suppress(Exception):
                torch._logging.set_logs()
            into[variant] = Provenance(tuple(artifacts), tuple(lines), sizes=sizes)
    log.debug("captured %d provenance artifacts and %d fusion log lines", len(artifacts), len(lines))


def fresh() -> None:
    """Drop the code ``torch.compile`` compiled in this process, so the next compile is captured anew."""
    import torch

    torch._dynamo.reset()


@contextmanager
def op_ranges() -> Iterator[None]:
    """An NVTX range per ATen op and per Triton launch while the block runs (``emit_nvtx``)."""
    import torch

    with torch.autograd.profiler.emit_nvtx():
        yield
