"""The timed pass of ``fuseci run`` times cases ahead of its profiled run while the GPU is free
and the profiled process still starts, hands the GPU over once the profiled run waits, and times
the rest after it; the parent stops a timed pass that keeps the GPU in one case too long while
the profiled run waits. CPU-only: the GPU's turn is a lock file whatever runs inside it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fuseci.config.model import Suite
from fuseci.files.locks import file_lock
from fuseci.harness import __main__ as harness
from fuseci.harness.__main__ import time_around
from fuseci.harness.event_timing import TimingOptions
from fuseci.measure import run as measure_run
from fuseci.measure import turn
from fuseci.measure.command import HarnessFiles
from fuseci.measure.turn import gpu_turn, waiting_file
from fuseci.records.harness import CaseRecord, CaseStatus, HarnessRecord, VariantTiming, read_record, write_record

SUITE = """
suite: s
cases:
""" + "".join(
    f"""  - id: c{i}
    inputs: {{x: {{shape: [4]}}}}
    variants: {{unfused: kernels.elementwise:scale_relu_add_unfused, fused: kernels.elementwise:scale_relu_add_fused}}
"""
    for i in range(3)
)


def _suite(tmp_path: Path) -> Suite:
    from fuseci.config.parse import load_suite

    path = tmp_path / "s.yaml"
    path.write_text(SUITE)
    return load_suite(path)


class FakeRun:
    """Stands for :func:`fuseci.harness.case_runner.run`: runs cases as the real one orders them, asks
    ``stop`` before each, and calls ``during`` after each (the test's hook into the timeline)."""

    def __init__(self, during: Any = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.during = during or (lambda case: None)

    def __call__(
        self, suite: Suite, record_path: Path, only: set[str] | None = None, *, timing: Any = None,
        check: bool = True, stop: Any = None, prior: HarnessRecord | None = None, first_calls: bool = False,
    ) -> HarnessRecord:  # fmt: skip
        self.calls.append({"only": only, "prior": prior, "first_calls": first_calls, "ran": []})
        record = prior or HarnessRecord(suite=suite.name, env={}, cases={})
        cases = dict(record.cases)
        for case in suite.cases:
            if (only is not None and case.id not in only) or case.id in cases:
                continue
            if stop is not None and stop():
                record = replace(record, cases=cases, complete=False)
                write_record(record, record_path)
                return record
            cases[case.id] = CaseRecord(case.id, CaseStatus.OK, first_call_ns={"fused": 2e9} if first_calls else {})
            self.calls[-1]["ran"].append(case.id)
            self.during(case.id)
        record = replace(record, cases=cases, complete=True)
        write_record(record, record_path)
        return record


def _profiled_record(path: Path, ok: list[str], wrong: list[str] = ()) -> None:
    cases = {c: CaseRecord(c, CaseStatus.OK) for c in ok}
    cases.update({c: CaseRecord(c, CaseStatus.WRONG, "wrong result") for c in wrong})
    write_record(HarnessRecord(suite="s", env={}, cases=cases, complete=True), path)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeRun:
    monkeypatch.setattr(harness.arrays, "open_context", lambda: None)
    runner = FakeRun()
    monkeypatch.setattr(harness, "run", runner)
    return runner


def test_a_free_gpu_is_used_ahead_of_the_profiled_run_for_every_case(tmp_path: Path, fake: FakeRun) -> None:
    lock, after = tmp_path / "gpu.lock", tmp_path / "s.harness.json"
    record = time_around(_suite(tmp_path), tmp_path / "s.timing.json", after, lock, None, TimingOptions())
    assert record.complete and sorted(record.cases) == ["c0", "c1", "c2"]
    assert [c["ran"] for c in fake.calls] == [["c0", "c1", "c2"]]
    assert fake.calls[0]["first_calls"]  # ahead of the profiled run, the first calls pay the cold start
    assert not lock.exists()  # given back


def test_the_gpu_is_handed_over_once_the_profiled_run_waits_and_the_rest_timed_after_it(
    tmp_path: Path, fake: FakeRun
) -> None:
    lock, after = tmp_path / "gpu.lock", tmp_path / "s.harness.json"

    def profiled_arrives(case: str) -> None:
        if case == "c0":  # the profiled run now waits; it then checks c1 right and c2 wrong
            waiting_file(after).touch()
            _profiled_record(after, ok=["c0", "c1"], wrong=["c2"])

    fake.during = profiled_arrives
    record = time_around(_suite(tmp_path), tmp_path / "s.timing.json", after, lock, None, TimingOptions())
    assert [c["ran"] for c in fake.calls] == [["c0"], ["c1"]]  # c2 checked wrong: not timed
    assert fake.calls[1]["only"] == {"c0", "c1"} and fake.calls[1]["prior"] is not None
    assert not fake.calls[1]["first_calls"]
    assert record.complete and sorted(record.cases) == ["c0", "c1"]


def test_nothing_is_run_again_when_the_cases_left_all_checked_wrong(tmp_path: Path, fake: FakeRun) -> None:
    lock, after = tmp_path / "gpu.lock", tmp_path / "s.harness.json"

    def profiled_arrives(case: str) -> None:
        waiting_file(after).touch()
        _profiled_record(after, ok=["c0"], wrong=["c1", "c2"])

    fake.during = profiled_arrives
    record = time_around(_suite(tmp_path), tmp_path / "s.timing.json", after, lock, None, TimingOptions())
    assert len(fake.calls) == 1 and record.complete and list(record.cases) == ["c0"]
    assert read_record(tmp_path / "s.timing.json").complete


def test_a_busy_gpu_or_a_started_profiled_run_means_timing_after_it(tmp_path: Path, fake: FakeRun) -> None:
    lock, after = tmp_path / "gpu.lock", tmp_path / "s.harness.json"
    _profiled_record(after, ok=["c0", "c2"])  # the profiled run already took the GPU (and ended)
    record = time_around(_suite(tmp_path), tmp_path / "s.timing.json", after, lock, None, TimingOptions())
    assert [c["ran"] for c in fake.calls] == [["c0", "c2"]] and not fake.calls[0]["first_calls"]
    assert sorted(record.cases) == ["c0", "c2"]

    fake.calls.clear()
    after.unlink()
    with file_lock(lock, 1.0):  # another suite's process holds the GPU: no timing ahead
        _profiled_record(after, ok=["c1"])
    record = time_around(_suite(tmp_path), tmp_path / "t.timing.json", after, lock, None, TimingOptions())
    assert [c["ran"] for c in fake.calls] == [["c1"]]


def test_the_cases_of_the_run_bound_the_timing_ahead(tmp_path: Path, fake: FakeRun) -> None:
    """``fuseci ab`` profiles some cases of a suite: its timed pass times those only."""
    lock, after = tmp_path / "gpu.lock", tmp_path / "s.harness.json"
    record = time_around(_suite(tmp_path), tmp_path / "s.timing.json", after, lock, {"c1"}, TimingOptions())
    assert list(record.cases) == ["c1"]


def test_a_profiled_run_says_it_waits_for_the_gpu_while_it_waits(tmp_path: Path) -> None:
    lock, announce = tmp_path / "gpu.lock", tmp_path / "s.harness.json.waiting"
    with gpu_turn(lock, 5, announce=announce):
        assert not announce.exists()  # the GPU is held: nobody waits
    assert not announce.exists()
    with file_lock(lock, 1.0), pytest.raises(Exception, match="stayed busy"), gpu_turn(lock, 0.2, announce=announce):
        pass
    assert not announce.exists()  # gone after a wait that failed too


def _timed_process() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)


def _stuck_record(path: Path, age_s: float) -> None:
    write_record(HarnessRecord(suite="s", env={}, cases={}, running="hangs"), path)
    then = time.time() - age_s
    os.utime(path, (then, then))


def test_a_timed_pass_stuck_ahead_of_a_waiting_profiled_run_is_stopped(tmp_path: Path) -> None:
    record, waiting = tmp_path / "s.timing.json", tmp_path / "s.harness.json.waiting"
    _stuck_record(record, age_s=100)
    waiting.touch()
    timer = _timed_process()
    watch = turn.AheadWatch(timer, record, waiting, limit_s=30)
    try:
        timer.wait(timeout=20)
    finally:
        watch.close()
        timer.kill()
    assert watch.stopped and timer.returncode is not None


@pytest.mark.parametrize(("age_s", "waits", "running"), [(5, True, True), (100, False, True), (100, True, False)])
def test_a_timed_pass_is_left_alone_unless_stuck_while_the_profiled_run_waits(
    tmp_path: Path, age_s: float, waits: bool, running: bool
) -> None:
    record, waiting = tmp_path / "s.timing.json", tmp_path / "s.harness.json.waiting"
    _stuck_record(record, age_s=age_s)
    if not running:  # between cases (waiting for the profiled record): nothing in hand
        write_record(HarnessRecord(suite="s", env={}, cases={}), record)
        os.utime(record, (time.time() - age_s,) * 2)
    if waits:
        waiting.touch()
    timer = _timed_process()
    watch = turn.AheadWatch(timer, record, waiting, limit_s=30)
    try:
        time.sleep(4 * turn.AheadWatch.POLL_S)
        assert timer.poll() is None and not watch.stopped
    finally:
        watch.close()
        timer.kill()
        timer.wait()


def test_the_cold_start_is_the_larger_first_call_of_the_two_processes(tmp_path: Path) -> None:
    timing = VariantTiming("fused", 1.0, 1.0, 1.0, 0.1, 5, 2, 1024)
    profiled = HarnessRecord(
        suite="s", env={}, complete=True,
        cases={"c0": CaseRecord("c0", CaseStatus.OK, first_call_ns={"unfused": 1e6, "fused": 5e7})},
    )  # fmt: skip
    ahead = HarnessRecord(
        suite="s", env={}, complete=True,
        cases={"c0": CaseRecord("c0", CaseStatus.OK, timings=(timing,), first_call_ns={"unfused": 2e6, "fused": 3e9},
                                autotuned={"fused": ("CachingAutotuner autotuned triton_poi_0",)})},
    )  # fmt: skip
    files = HarnessFiles(tmp_path / "t.json", tmp_path / "t.log")
    merged = measure_run._with_timings(profiled, ahead, ["c0"], files, again=False).cases["c0"]
    assert merged.first_call_ns == {"unfused": 2e6, "fused": 3e9}
    assert merged.autotuned == {"fused": ("CachingAutotuner autotuned triton_poi_0",)}
    assert merged.timings == (timing,)
