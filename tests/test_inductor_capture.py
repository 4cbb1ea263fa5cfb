"""The capture's symbolic sizes, from Dynamo's ``create_symbol`` events in the structured trace
(no PyTorch needed: the events are log records; the gpu-marked factory test compiles one)."""

from __future__ import annotations

import logging

from fuseci.harness.arrays.inductor import _Trace


def _record(metadata: dict, payload: object = None) -> logging.LogRecord:
    record = logging.LogRecord("torch.__trace", logging.DEBUG, __file__, 1, "", (), None)
    record.metadata = metadata
    record.payload = payload
    return record


def test_each_symbol_s_value_is_kept_by_graph_and_artifacts_still_by_name() -> None:
    artifacts: list = []
    sizes: dict[str, dict[str, int]] = {}
    trace = _Trace(artifacts, sizes)
    trace.emit(_record({"create_symbol": {"symbol": "s77", "val": "4"}, "frame_id": 0, "frame_compile_id": 0}))
    trace.emit(_record({"create_symbol": {"symbol": "s27", "val": "256"}, "frame_id": 0, "frame_compile_id": 0}))
    trace.emit(_record({"create_symbol": {"symbol": "s0", "val": "3"}, "frame_id": 1, "frame_compile_id": 2}))
    trace.emit(_record({"inductor_post_grad_graph": {}, "frame_id": 0, "frame_compile_id": 0}, "graph"))
    assert sizes == {"0/0": {"s77": 4, "s27": 256}, "1/2": {"s0": 3}}
    assert [a.name for a in artifacts] == ["inductor_post_grad_graph"]


def test_a_symbol_without_a_size_or_a_graph_is_left_out() -> None:
    sizes: dict[str, dict[str, int]] = {}
    trace = _Trace([], sizes)
    for metadata in (
        {"create_symbol": {"symbol": "s1", "val": "s0 + 1"}, "frame_id": 0, "frame_compile_id": 0},  # not a value
        {"create_symbol": {"symbol": "s2", "val": "-1"}, "frame_id": 0, "frame_compile_id": 0},  # not a size
        {"create_symbol": {"symbol": "s3", "val": "8"}},  # outside a compile
        {"create_symbol": {"symbol": 5, "val": "8"}, "frame_id": 0, "frame_compile_id": 0},
    ):
        trace.emit(_record(metadata))
    assert sizes == {}
