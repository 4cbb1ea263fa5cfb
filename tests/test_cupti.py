"""The in-process counters without a GPU: the CUPTI parameter blocks' sizes as cupti's headers
declare them, the metrics asked of PerfWorks, the probe switched off by default, and the probe's
comparison with ncu on a recorded report (tools/cupti_probe.py)."""

from __future__ import annotations

import ctypes
import json
import lzma
import sys
from pathlib import Path

import pytest
from helpers import CLEAN_REPORT, ROOT

from fuseci.harness import cupti, in_process

sys.path.insert(0, str(ROOT / "tools"))
import cupti_probe


@pytest.mark.parametrize(
    ("struct", "last", "size"),
    [
        # CUPTI_PROFILER_STRUCT_SIZE(type, last field) of CUDA 13.4's headers, on x86-64
        (cupti.EnableP, "pRangeProfilerObject", 32),  # before 13.4: no cache control
        (cupti.EnableP, "cacheControlMode", 36),
        (cupti.SetConfigP, "targetNestingLevel", 90),
        (cupti.StopP, "isAllPassSubmitted", 41),
        (cupti.DataSizeP, "counterDataSize", 64),
        (cupti.HostInitializeP, "pSinglePassMetricSetName", 56),
        (cupti.EvaluateP, "pMetricValues", 72),
        (cupti.AvailabilityP, "bAllowDeviceLevelCounters", 41),
        (cupti.RangeInfoP, "rangeName", 56),
        (cupti.PassesP, "numOfPasses", 40),
        (cupti.ChipNameP, "pChipName", 32),
    ],
)
def test_parameter_blocks_have_the_headers_sizes(struct: type, last: str, size: int) -> None:
    assert cupti._size(struct, last) == size


def test_launch_parameters_read_as_the_driver_lays_them_out() -> None:
    # cuLaunchKernel_params: CUfunction, then gridDimX..blockDimZ and sharedMemBytes as unsigned
    assert cupti.LaunchPlain.smem.offset == 8 + 6 * 4
    assert cupti.LaunchEx.f.offset == 8
    assert cupti.CallbackData.symbolName.offset == 32


def test_perfworks_is_asked_only_for_hardware_counters() -> None:
    with_tma, without = in_process.counter_metrics(True), in_process.counter_metrics(False)
    assert not any(m.startswith(("launch__", "profiler__")) for m in with_tma)
    assert "sm__maximum_warps_per_active_cycle_pct" not in with_tma
    assert set(with_tma) - set(without) == {
        "l1tex__m_xbar2l1tex_read_bytes_pipe_tma.sum",
        "l1tex__m_l1tex2xbar_write_bytes_mem_global_op_tma_st.sum",
    }
    assert "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum" in without


def test_the_probe_is_off_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(in_process.PROBE_ENV, raising=False)
    assert in_process.get() is None


def test_no_library_is_a_message_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cupti, "loaded_library", lambda: None)
    monkeypatch.setattr(cupti, "wheel_library", lambda: None)
    monkeypatch.setattr(cupti, "TOOLKIT_LIBRARIES", ())
    monkeypatch.delenv(cupti.LIBRARY_ENV, raising=False)
    with pytest.raises(cupti.HarnessError, match="nvidia-cuda-cupti"):
        cupti.find_library()


def _probe_from_report(report: Path, out: Path, change: float = 0.0) -> dict[str, list[dict]]:
    """A probe's lines written from ncu's own values (one of them moved by ``change``)."""
    kernels = cupti_probe.ncu_kernels(report)
    with (out / "cupti.jsonl").open("w") as f:
        f.write(json.dumps({"passes": 1, "chip": "GH100"}) + "\n")
        for i, (name, rows) in enumerate(kernels.items()):
            values = [[row["mangled"], dict(row["metrics"])] for row in rows]
            if i == 0 and change:
                values[0][1]["smsp__inst_executed.sum"] += change
            launches = [
                {
                    "name": row["mangled"],
                    "api": "cuLaunchKernel",
                    **{f: row["metrics"][m] for m, f in cupti_probe.SHAPE.items()},
                }
                for row in rows
            ]
            line = {"range": name, "kernels": values, "launches": launches, "dropped": 0}
            line |= {"seconds_plain": 0.010, "seconds_call": 0.011, "seconds_decode": 0.001}
            f.write(json.dumps(line) + "\n")
    return kernels


@pytest.mark.parametrize("change", [0.0, 1.0])
def test_the_probe_compares_every_kernel_with_ncu(tmp_path: Path, change: float) -> None:
    (tmp_path / "ncu").mkdir()
    report = tmp_path / "ncu" / "elementwise.ncu-rep"
    report.write_bytes(lzma.decompress(CLEAN_REPORT.read_bytes()))
    (tmp_path / "walls.json").write_text("{}")
    kernels = _probe_from_report(report, tmp_path, change)
    result = cupti_probe.compare(tmp_path)
    n = sum(len(rows) for rows in kernels.values())
    assert result["counts"]["kernels_ncu"] == result["counts"]["kernels_probe"] == n
    assert result["exact"]["launch__grid_size"] == [n, n]
    inst = result["exact"]["smsp__inst_executed.sum"]
    assert inst == ([n, n] if not change else [n - 1, n])
    assert len(result["misses"]) == (1 if change else 0)
    assert result["cost_per_kernel_s"] is not None


class _FakeCupti:
    """libcupti's calls as the window makes them, recorded; Stop submits the last pass only."""

    def __init__(self, passes_to_submit: int) -> None:
        self.calls: list[str] = []
        self.stops = 0
        self.passes_to_submit = passes_to_submit

    def __getattr__(self, name: str):
        def call(*args):
            self.calls.append(name)
            if name == "cuptiRangeProfilerStop":
                self.stops += 1
                args[0]._obj.isAllPassSubmitted = int(self.stops == self.passes_to_submit)
            return 0

        return call


def _counters(passes: int, replay: str, submit_at: int) -> cupti.Counters:
    c = object.__new__(cupti.Counters)
    c.lib, c.passes, c.replay, c.path = _FakeCupti(submit_at), passes, replay, "fake"
    c.metrics, c._names, c.max_ranges = (), None, 1
    c._data, c._config, c.rp, c.host = (ctypes.c_uint8 * 8)(), (ctypes.c_uint8 * 8)(), None, None
    c._launches = []
    return c


def test_user_replay_runs_the_call_again_for_each_pass_before_the_block() -> None:
    c = _counters(passes=2, replay="user", submit_at=2)
    order: list[str] = []
    with c.window(lambda: order.append("sync"), again=lambda: order.append("again")):
        order.append("block")
    assert order == ["again", "sync", "block", "sync"]
    assert c.lib.calls.count("cuptiRangeProfilerStart") == 2
    assert c.lib.calls[-2:] == ["cuptiRangeProfilerCounterDataImageInitialize", "cuptiRangeProfilerSetConfig"]


@pytest.mark.parametrize(("passes", "replay"), [(2, "kernel"), (1, "user")])
def test_kernel_replay_and_one_pass_run_the_block_alone(passes: int, replay: str) -> None:
    c = _counters(passes=passes, replay=replay, submit_at=1)
    order: list[str] = []
    with c.window(lambda: None, again=lambda: order.append("again")):
        order.append("block")
    assert order == ["block"]


def test_a_pass_left_unsubmitted_is_an_error() -> None:
    c = _counters(passes=2, replay="user", submit_at=3)
    with pytest.raises(cupti.HarnessError, match="did not submit"), c.window(lambda: None, again=lambda: None):
        pass
    c = _counters(passes=3, replay="user", submit_at=1)
    with pytest.raises(cupti.HarnessError, match="fewer passes"), c.window(lambda: None, again=lambda: None):
        pass


def test_counts_recorded_in_process_on_an_h100_equal_ncus(tmp_path: Path) -> None:
    """The elementwise suite counted in the harness by CUPTI 13.4 on an H100 (driver 580, cache
    control all, one pass; tests/data/cupti/README.md) against ncu's recording of the same
    suite on an H100: every gated counter that repeats under ncu, and every launch, identical."""
    (tmp_path / "ncu").mkdir()
    report = tmp_path / "ncu" / "elementwise.ncu-rep"
    report.write_bytes(lzma.decompress((ROOT / "tests/data/reports/elementwise-h100.ncu-rep.xz").read_bytes()))
    (tmp_path / "cupti.jsonl").write_bytes(
        lzma.decompress((ROOT / "tests/data/cupti/elementwise-h100.jsonl.xz").read_bytes())
    )
    (tmp_path / "walls.json").write_text("{}")
    result = cupti_probe.compare(tmp_path)
    assert result["head"]["chip"] == "GH100" and result["head"]["cupti_version"] == 130401
    assert result["counts"]["kernels_ncu"] == result["counts"]["kernels_probe"] == 31
    assert not result["counts"]["unaligned"]
    for metric in (*cupti_probe.EXACT, *cupti_probe.SHAPE, "name"):
        if metric == "lts__t_sectors_srcunit_tex_op_read.sum":
            continue  # moves between ncu's own runs on these kernels: below
        ok, n = result["exact"][metric]
        assert ok == n, metric
    assert result["exact"]["launch__grid_size"] == [31, 31]
    reads = [m for m in result["misses"] if m["metric"] == "lts__t_sectors_srcunit_tex_op_read.sum"]
    assert all(abs(m["probe"] - m["ncu"]) / m["ncu"] < 1e-4 for m in reads)
