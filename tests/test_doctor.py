"""``fuseci doctor``: every check's verdict with fake tools, the pure argv builders, the CLI here (no GPU)."""

from __future__ import annotations

import importlib.util
import json
import math
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from helpers import CLEAN_REPORT
from typer.testing import CliRunner

from fuseci import doctor
from fuseci.cli import app
from fuseci.config import names
from fuseci.doctor import diagnosis, host, profiling
from fuseci.doctor.diagnosis import CheckStatus, Clocks, DoctorOptions, Gpu
from fuseci.errors import ReportError
from fuseci.frames import report
from fuseci.harness import probe as harness
from fuseci.harness.__main__ import main as harness_main
from fuseci.measure import profile as ncu
from fuseci.measure.command import SuiteFiles
from fuseci.reporters.doctor import render_json, render_table

HAS_CUPY = importlib.util.find_spec("cupy") is not None

# --- fakes: nvidia-smi, ncu, and a Python that plays the probe -----------------------------------

# Answers --query-gpu=FIELDS like nvidia-smi, as FAKE_SMI_MODE says.
FAKE_SMI = """#!{python}
import os, sys
mode = os.environ.get("FAKE_SMI_MODE", "ok")
if mode == "nodev":
    print("No devices were found")
    sys.exit(6)
if mode == "nodriver":
    print("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    sys.exit(9)
if mode == "empty":
    sys.exit(0)
assert sys.argv[2:] == ["--format=csv,noheader"], sys.argv
fields = sys.argv[1].removeprefix("--query-gpu=").split(",")
values = {{
    "name": "NVIDIA H200", "driver_version": "580.159.04", "compute_cap": "9.0",
    "clocks.sm": "345 MHz", "clocks.max.sm": "1980 MHz",
    "clocks.applications.graphics": "1980 MHz", "clocks.default_applications.graphics": "1980 MHz",
    "clocks_event_reasons.applications_clocks_setting": "Not Active",
}}
if mode == "appclocks":
    values["clocks.applications.graphics"] = "1500 MHz"
if mode == "locked":
    values["clocks_event_reasons.applications_clocks_setting"] = "Active"
if mode == "na":
    values.update({{k: "[N/A]" for k in values if k.startswith("clocks")}})
if mode == "old":  # knows neither application clocks nor the new name of the event reasons
    for f in fields:
        if f.startswith(("clocks_event_reasons", "clocks.applications", "clocks.default_applications")):
            print(f'Field "{{f}}" is not a valid field to query.')
            sys.exit(2)
    values["clocks_throttle_reasons.applications_clocks_setting"] = "Active"
for _ in range(int(os.environ.get("FAKE_SMI_GPUS", "1"))):
    print(", ".join(values[f] for f in fields))
"""

# Plays ncu as FAKE_NCU_MODE says, writing its log and report where ncu would.
FAKE_NCU = """#!{python}
import os, sys, time
argv = sys.argv[1:]
mode = os.environ.get("FAKE_NCU_MODE", "ok")
if argv == ["--version"]:
    if mode == "broken":
        print("ncu: cannot open shared object file")
        sys.exit(127)
    print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2025.3.1.0 (build 1) (public-release)")
    sys.exit(0)
log = argv[argv.index("--log-file") + 1]
report = argv[argv.index("--export") + 1]
with open(log, "w") as fh:
    if mode == "perm":
        fh.write("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters\\n")
        sys.exit(1)
    if mode == "dcgm":
        fh.write("==ERROR== Profiling failed because a driver resource was unavailable.\\n")
        sys.exit(1)
    if mode == "none":
        fh.write("==WARNING== No kernels were profiled.\\n")
        sys.exit(0)
    fh.write("==PROF== Connected to process\\n")
if mode == "crash":
    print("Traceback (most recent call last):\\nRuntimeError: probe exploded under ncu")
    sys.exit(134)
if mode == "hang":
    time.sleep(30)
open(report, "wb").write(b"not really a report")
"""

# Plays `python -m fuseci.harness --probe --record PATH` as FAKE_PROBE_MODE says.
FAKE_PYTHON = """#!{python}
import json, os, sys, time
assert sys.argv[1:4] == ["-m", "fuseci.harness", "--probe"], sys.argv
record = sys.argv[sys.argv.index("--record") + 1]
mode = os.environ.get("FAKE_PROBE_MODE", "ok")
if mode == "crash":
    print("Traceback (most recent call last):\\nSystemError: probe exploded")
    sys.exit(1)
if mode == "hang":
    time.sleep(30)
env = {{"gpu_name": "NVIDIA H200", "compute_capability": "9.0", "cupy_version": "14.2.0",
       "cuda_runtime": "13.0", "cuda_driver_api": "13.0"}}
error, message, code = {{
    "ok": ("", "", 0),
    "nocupy": ("no-cupy", "No module named 'cupy'", 3),
    "nodevice": ("no-device", "CUDARuntimeError: cudaErrorInsufficientDriver", 3),
    "cuda": ("cuda-error", "CompileException: nvrtc: error: failed to open libnvrtc-builtins.so.13.0", 3),
    "wrong": ("wrong-result", "y = a * x + b is off by up to 3 on 4194304 elements", 1),
}}[mode]
doc = {{"format": "fuseci-probe", "ok": code == 0, "error": error, "message": message, "env": env,
       "max_abs_err": 0.0}}
with open(record, "w") as fh:
    json.dump(doc, fh)
sys.exit(code)
"""


def _script(path: Path, text: str) -> Path:
    path.write_text(text.format(python=sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@dataclass
class Machine:
    """A PATH holding only the fakes asked for, and a fake Python for the probe."""

    bin: Path
    python: Path
    monkeypatch: pytest.MonkeyPatch

    def options(self, **kw: float) -> DoctorOptions:
        return DoctorOptions(python=str(self.python), **kw)

    def modes(self, smi: str = "ok", ncu: str = "ok", probe: str = "ok") -> None:
        self.monkeypatch.setenv("FAKE_SMI_MODE", smi)
        self.monkeypatch.setenv("FAKE_NCU_MODE", ncu)
        self.monkeypatch.setenv("FAKE_PROBE_MODE", probe)

    def remove(self, tool: str) -> None:
        (self.bin / tool).unlink()


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Machine:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _script(bin_dir / "nvidia-smi", FAKE_SMI)
    _script(bin_dir / "ncu", FAKE_NCU)
    python = _script(tmp_path / "python", FAKE_PYTHON)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("FUSECI_NCU", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(ncu, "_FALLBACK_GLOBS", ())
    m = Machine(bin_dir, python, monkeypatch)
    m.modes()
    return m


def _frame(*rows: tuple[str, str, str, float, float]) -> pd.DataFrame:
    records = [
        {
            **{c: math.nan for c in report.kernel_columns()},
            names.SUITE: suite,
            names.CASE: case,
            names.VARIANT: variant,
            names.KERNEL_INDEX: 0,
            names.KERNEL: "fuseci_probe",
            names.DEVICE_NAME: "NVIDIA H200",
            names.DRAM_READ: read,
            names.DURATION: duration,
        }
        for suite, case, variant, read, duration in rows
    ]
    return pd.DataFrame.from_records(records, columns=list(report.kernel_columns()))


PROBE_ROW = ("doctor", "probe", "kernel", 16.8e6, 9800.0)


# --- pure argv builders --------------------------------------------------------------------------


def test_probe_command_exact_argv() -> None:
    assert profiling.build_probe_command(Path("w/probe.json"), python="/py") == [
        "/py", "-m", "fuseci.harness", "--probe", "--record", "w/probe.json",
    ]  # fmt: skip


def test_profile_command_exact_argv() -> None:
    files = SuiteFiles(Path("/tmp/d"), "doctor")
    assert profiling.build_profile_command("/opt/ncu", files, python="/py") == [
        "/opt/ncu",
        "--config-file", "off",
        "--nvtx",
        "--nvtx-include", "regex:^fuseci:doctor:.*/",
        "--nvtx-exclude", "regex:^fuseci-repeat:.*/",
        "--metrics",
        "gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,"
        "sm__maximum_warps_per_active_cycle_pct,sm__warps_active.avg.pct_of_peak_sustained_active,"
        "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum,"
        "l1tex__m_xbar2l1tex_read_bytes_pipe_tma.sum,l1tex__m_l1tex2xbar_write_bytes_mem_global_op_tma_st.sum,"
        "smsp__inst_executed.sum,lts__t_sectors_srcunit_tex_op_read.sum,"
        "dram__bytes_read.sum.per_second,dram__bytes_write.sum.per_second,"
        "dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex_op_write.sum,"
        "launch__grid_size,launch__block_size,launch__registers_per_thread,profiler__replayer_passes,"
        "launch__shared_mem_per_block_static,launch__shared_mem_per_block_dynamic,"
        "launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__occupancy_limit_warps,"
        "launch__occupancy_limit_blocks",
        "--clock-control", "none",
        "--cache-control", "all",
        "--replay-mode", "kernel",
        "--export", "/tmp/d/doctor.ncu-rep",
        "--force-overwrite",
        "--log-file", "/tmp/d/doctor.ncu.log",
        "/py", "-m", "fuseci.harness", "--probe", "--record", "/tmp/d/doctor.harness.json",
    ]  # fmt: skip


def test_probe_range_is_what_the_filter_selects() -> None:
    assert names.range_name(*harness.PROBE_IDS) == "fuseci:doctor:probe:kernel"
    assert names.parse_range(names.range_name(*harness.PROBE_IDS))[:3] == harness.PROBE_IDS


def test_smi_command_exact_argv() -> None:
    assert host.smi_command(diagnosis.GPU_FIELDS, "/usr/bin/nvidia-smi") == [
        "/usr/bin/nvidia-smi",
        "--query-gpu=name,driver_version,compute_cap,clocks.sm,clocks.max.sm",
        "--format=csv,noheader",
    ]


# --- 1-3: fuseci, ncu, reader --------------------------------------------------------------------


def test_fuseci_check_is_always_ok() -> None:
    check = host.check_fuseci()
    assert check.status is CheckStatus.OK
    assert check.facts["fuseci_version"] in check.detail and check.facts["python"] == sys.executable


def test_ncu_found_with_its_version(machine: Machine) -> None:
    check, exe = host.check_ncu()
    assert check.status is CheckStatus.OK and exe == str(machine.bin / "ncu")
    assert check.detail == f"ncu 2025.3.1.0 ({exe})" and check.facts["version"] == "2025.3.1.0"


def test_ncu_missing_fails_with_the_install_hint(machine: Machine) -> None:
    machine.remove("ncu")
    check, exe = host.check_ncu()
    assert exe is None and check.status is CheckStatus.FAIL
    assert check.detail.startswith("ncu (Nsight Compute) not found on PATH")
    assert check.fix == ncu.INSTALL_FIX and ncu.INSTALL_FIX not in check.detail
    check, _ = host.check_ncu("/no/such/ncu")
    assert check.status is CheckStatus.FAIL and "'/no/such/ncu'" in check.detail and check.fix == ncu.INSTALL_FIX


def test_ncu_that_does_not_run_fails(machine: Machine) -> None:
    machine.modes(ncu="broken")
    check, exe = host.check_ncu()
    assert exe is None and check.status is CheckStatus.FAIL
    assert "printed no version" in check.detail and "--ncu" in check.fix


def test_reader_is_the_pypi_package_here() -> None:
    check = host.check_reader()
    assert check.status is CheckStatus.OK
    assert check.facts["source"] == "pypi" and check.facts["version"]
    assert f"ncu_report {check.facts['version']} from the PyPI package ncu-report" in check.detail


def test_reader_missing_fails_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(ncu: str | None = None) -> None:
        raise ReportError("NVIDIA's report reader is not installed: `pip install ncu-report`")

    monkeypatch.setattr(report, "load_reader", missing)
    check = host.check_reader()
    assert check.status is CheckStatus.FAIL and "not installed" in check.detail
    assert "pip install ncu-report" in check.fix


# --- 4-5: GPU, clocks ----------------------------------------------------------------------------


def test_parse_gpus() -> None:
    text = (
        "NVIDIA H200, 580.159.04, 9.0, 1980 MHz, 1980 MHz\n"
        "Odd, Name, 580.159.04, 8.0, [N/A], 1410 MHz\n"
        "No devices were found\n\n"
    )
    assert host.parse_gpus(text) == [
        Gpu(0, "NVIDIA H200", "580.159.04", "9.0", 1980, 1980),
        Gpu(1, "Odd, Name", "580.159.04", "8.0", None, 1410),
    ]


def test_gpus_listed(machine: Machine) -> None:
    machine.monkeypatch.setenv("FAKE_SMI_GPUS", "2")
    machine.monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    check, gpus = host.check_gpu()
    assert check.status is CheckStatus.OK and len(gpus) == 2
    assert check.detail.splitlines() == [
        "GPU 0: NVIDIA H200, sm_90, driver 580.159.04",
        "GPU 1: NVIDIA H200, sm_90, driver 580.159.04",
        "CUDA_VISIBLE_DEVICES='1': CUDA programs see only these",
    ]


@pytest.mark.parametrize(
    ("mode", "fragment"),
    [
        ("missing", "nvidia-smi is not on PATH"),
        ("nodev", "exited with code 6 and said: No devices were found"),
        ("nodriver", "couldn't communicate with the NVIDIA driver"),
        ("empty", "exited with code 0 and said: nothing"),
    ],
)
def test_no_gpu_fails_with_the_fixes(machine: Machine, mode: str, fragment: str) -> None:
    if mode == "missing":
        machine.remove("nvidia-smi")
    else:
        machine.modes(smi=mode)
    check, gpus = host.check_gpu()
    assert gpus == [] and check.status is CheckStatus.FAIL
    assert check.detail.startswith("no NVIDIA GPU visible") and fragment in check.detail
    for fix in ("driver is installed", "--gpus all", "CUDA_VISIBLE_DEVICES"):
        assert fix in check.fix


@pytest.mark.parametrize(
    ("mode", "status", "fragment"),
    [
        ("ok", CheckStatus.OK, "GPU 0: SM clock 345 MHz now, max 1980 MHz; application clocks 1980 MHz (default 1980 MHz) (below max is normal while the GPU idles)"),
        ("appclocks", CheckStatus.WARN, "application clocks 1500 MHz (default 1980 MHz): application clocks changed from their default"),
        ("locked", CheckStatus.WARN, "a user clock setting (application or locked clocks) limits the clocks"),
        ("old", CheckStatus.WARN, "GPU 0: SM clock 345 MHz now, max 1980 MHz: a user clock setting"),
        ("na", CheckStatus.OK, "GPU 0: SM clock ? now, max ?"),
    ],
)  # fmt: skip
def test_clock_state(machine: Machine, mode: str, status: CheckStatus, fragment: str) -> None:
    machine.modes(smi=mode)
    _, gpus = host.check_gpu()
    check = host.assess_clocks(host.read_clocks(gpus))
    assert check.status is status and fragment in check.detail
    if status is CheckStatus.WARN:
        assert "nvidia-smi -rgc" in check.fix and "never changes them" in check.fix
    else:
        assert check.fix == ""


def test_clocks_never_fail() -> None:
    gpu = Gpu(0, "NVIDIA H100 80GB HBM3", "580.1", "9.0", 1980, 1980)
    worst = Clocks(gpu, applications_mhz=1000, default_applications_mhz=1755, user_clock_limit=True)
    assert host.assess_clocks([worst]).status is CheckStatus.WARN
    assert host.assess_clocks([Clocks(gpu)]).status is CheckStatus.OK


# --- 6: CuPy probe -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "status", "detail", "fix"),
    [
        ("ok", CheckStatus.OK, "CuPy 14.2.0, CUDA runtime 13.0 (the driver supports 13.0), NVIDIA H200 (sm_90)", ""),
        ("nocupy", CheckStatus.FAIL, "no device runtime can be imported", "pip install 'fuseci[cuda12]'"),
        ("nodevice", CheckStatus.FAIL, "CuPy sees no CUDA device: CUDARuntimeError", "CUDA_VISIBLE_DEVICES"),
        ("cuda", CheckStatus.FAIL, "nvrtc: error", "pip install 'fuseci[cuda13]'"),
        ("wrong", CheckStatus.FAIL, "computed a wrong result: y = a * x + b is off", "Xid"),
        ("crash", CheckStatus.FAIL, "exited with code 1 and wrote no record; its last lines:\nTraceback", "--probe"),
    ],
)
def test_cupy_probe(machine: Machine, tmp_path: Path, mode: str, status: CheckStatus, detail: str, fix: str) -> None:
    machine.modes(probe=mode)
    check = profiling.check_cupy(machine.options(), tmp_path)
    assert check.status is status and detail in check.detail and fix in check.fix


def test_cupy_probe_timeout(machine: Machine, tmp_path: Path) -> None:
    machine.modes(probe="hang")
    check = profiling.check_cupy(machine.options(probe_timeout_s=1), tmp_path)
    assert check.status is CheckStatus.FAIL and "did not finish within 1 s" in check.detail


@pytest.mark.skipif(HAS_CUPY, reason="CuPy is installed here")
def test_real_probe_without_cupy(tmp_path: Path) -> None:
    check = profiling.check_cupy(DoctorOptions(), tmp_path)
    assert check.status is CheckStatus.FAIL and "No module named 'cupy'" in check.detail
    assert "pip install 'fuseci[cuda12]'" in check.fix and "fuseci[cuda13]" in check.fix


@pytest.mark.skipif(HAS_CUPY, reason="CuPy is installed here")
def test_harness_probe_mode_without_cupy(tmp_path: Path) -> None:
    record = tmp_path / "p.json"
    assert harness_main(["--probe", "--record", str(record)]) == 3
    probe = profiling.read_probe(record)
    assert probe is not None and not probe.ok and probe.error == harness.ProbeFailure.NO_CUPY


@pytest.mark.parametrize("argv", [["--record", "r.json"], ["--probe", "s.yaml", "--record", "r.json"], ["--probe", "--time", "--record", "r"]])  # fmt: skip
def test_harness_probe_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        harness_main(argv)
    assert info.value.code == 2


# --- 7-8: profiling, readback --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "detail", "fix"),
    [
        ("perm", ncu.PERMISSION_PROBLEM, ncu.PERMISSION_FIX),
        ("dcgm", ncu.DCGM_PROBLEM, ncu.DCGM_FIX),
        ("none", "ncu profiled no kernel", "update Nsight Compute"),
        ("crash", "the profiled run exited with code 134; last lines:\nTraceback", "runs outside ncu"),
    ],
)
def test_profiling_failures_are_explained(machine: Machine, tmp_path: Path, mode: str, detail: str, fix: str) -> None:
    machine.modes(ncu=mode)
    check, path = profiling.check_profiling(str(machine.bin / "ncu"), machine.options(), tmp_path)
    assert path is None and check.status is CheckStatus.FAIL
    assert detail in check.detail and fix in check.fix
    if mode == "crash":
        assert "probe exploded under ncu" in check.detail


def test_profiling_timeout(machine: Machine, tmp_path: Path) -> None:
    machine.modes(ncu="hang")
    check, path = profiling.check_profiling(str(machine.bin / "ncu"), machine.options(profile_timeout_s=1), tmp_path)
    assert path is None and check.status is CheckStatus.FAIL and "did not finish within 1 s" in check.detail


def test_profiling_writes_a_report(machine: Machine, tmp_path: Path) -> None:
    check, path = profiling.check_profiling(str(machine.bin / "ncu"), machine.options(), tmp_path)
    assert check.status is CheckStatus.OK and path == tmp_path / "doctor.ncu-rep" and path.exists()


def test_readback_of_the_probe_kernel() -> None:
    check = profiling.assess_readback(_frame(PROBE_ROW))
    assert check.status is CheckStatus.OK
    assert check.detail == (
        "1 kernel (fuseci_probe) in doctor/probe/kernel: dram__bytes_read.sum 16.8 MB, gpu__time_duration.sum 9.8 us"
    )
    assert check.facts["dram_bytes_read"] == 16.8e6


def test_readback_with_only_a_duration_passes() -> None:
    assert profiling.assess_readback(_frame(("doctor", "probe", "kernel", math.nan, 5.0))).status is CheckStatus.OK


@pytest.mark.parametrize(
    ("rows", "fragment"),
    [
        ((), "holds 0 there and 0 elsewhere"),
        ((PROBE_ROW, PROBE_ROW), "holds 2 there and 0 elsewhere"),
        ((PROBE_ROW, ("other", "probe", "kernel", 1.0, 1.0)), "holds 1 there and 1 elsewhere"),
        ((("doctor", "probe", "kernel", 0.0, math.nan),), "no positive dram__bytes_read.sum"),
    ],
)
def test_readback_failures(rows: tuple, fragment: str) -> None:
    check = profiling.assess_readback(_frame(*rows))
    assert check.status is CheckStatus.FAIL and fragment in check.detail and "ncu-report" in check.fix


def test_readback_of_a_suite_report_is_not_the_probe() -> None:
    check = profiling.check_readback(CLEAN_REPORT)
    assert check.status is CheckStatus.FAIL and "holds 0 there and 31 elsewhere" in check.detail


def test_readback_of_an_unreadable_report(tmp_path: Path) -> None:
    bad = tmp_path / "doctor.ncu-rep"
    bad.write_bytes(b"not really a report")
    check = profiling.check_readback(bad)
    assert check.status is CheckStatus.FAIL and "holds no profiled kernel" in check.detail and "ncu-report" in check.fix


# --- all checks: order, skips, exit code ---------------------------------------------------------


def _statuses(d: diagnosis.Diagnosis) -> dict[str, str]:
    return {c.name: c.status.value for c in d.checks}


def _check(d: diagnosis.Diagnosis, name: str) -> diagnosis.Check:
    return next(c for c in d.checks if c.name == name)


def test_every_check_passes(machine: Machine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "read_report", lambda path, ncu=None: _frame(PROBE_ROW))
    d = doctor.diagnose(machine.options())
    assert [c.name for c in d.checks] == list(diagnosis.CHECKS)
    assert set(_statuses(d).values()) == {"OK"} and d.exit_code == 0


def test_a_clock_warning_still_exits_0(machine: Machine, monkeypatch: pytest.MonkeyPatch) -> None:
    machine.modes(smi="locked")
    monkeypatch.setattr(report, "read_report", lambda path, ncu=None: _frame(PROBE_ROW))
    d = doctor.diagnose(machine.options())
    assert _check(d, "clocks").status is CheckStatus.WARN and d.exit_code == 0


def test_no_gpu_skips_what_needs_one(machine: Machine) -> None:
    machine.modes(smi="nodev")
    d = doctor.diagnose(machine.options())
    assert _statuses(d) == {
        "fuseci": "OK", "ncu": "OK", "reader": "OK", "gpu": "FAIL",
        "clocks": "SKIP", "cupy": "SKIP", "profiling": "SKIP", "readback": "SKIP",
    }  # fmt: skip
    assert _check(d, "profiling").detail == "not run: the 'GPU, driver' check failed"
    assert d.exit_code == 3


def test_no_ncu_skips_profiling(machine: Machine) -> None:
    machine.remove("ncu")
    d = doctor.diagnose(machine.options())
    assert _statuses(d)["cupy"] == "OK"
    assert (_check(d, "profiling").status, _check(d, "readback").status) == (CheckStatus.SKIP, CheckStatus.SKIP)
    assert "'ncu'" in _check(d, "profiling").detail and d.exit_code == 3


def test_failed_probe_skips_profiling(machine: Machine) -> None:
    machine.modes(probe="nocupy")
    d = doctor.diagnose(machine.options())
    assert _statuses(d)["cupy"] == "FAIL" and "'CuPy, CUDA'" in _check(d, "profiling").detail


def test_permission_denied_end_to_end(machine: Machine) -> None:
    machine.modes(ncu="perm")
    d = doctor.diagnose(machine.options())
    profiling = _check(d, "profiling")
    assert profiling.status is CheckStatus.FAIL and profiling.fix == ncu.PERMISSION_FIX
    assert _check(d, "readback").status is CheckStatus.SKIP and d.exit_code == 3
    table = render_table(d)
    assert "profiling        FAIL    ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM)" in table
    assert "fix: run as root or with CAP_SYS_ADMIN" in table


def test_missing_reader_skips_readback(machine: Machine, monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(ncu: str | None = None) -> None:
        raise ReportError("NVIDIA's report reader is not installed")

    monkeypatch.setattr(report, "load_reader", missing)
    d = doctor.diagnose(machine.options())
    assert _statuses(d)["profiling"] == "OK" and "'report reader'" in _check(d, "readback").detail


def test_table_and_json(machine: Machine) -> None:
    machine.modes(smi="nodev")
    d = doctor.diagnose(machine.options())
    table = render_table(d)
    assert table.startswith("fuseci doctor\n\n  check            status  detail\n")
    assert table.endswith("\nfuseci doctor: 3 ok, 1 failed, 4 skipped; exit 3\n")
    rows = table.splitlines()
    ok_row = next(i for i, line in enumerate(rows) if line.startswith("  ncu "))
    assert "fix:" not in rows[ok_row + 1]  # OK rows carry no fix line
    gpu_row = next(i for i, line in enumerate(rows) if line.startswith("  GPU, driver "))
    assert "FAIL    no NVIDIA GPU visible" in rows[gpu_row] and rows[gpu_row + 1].strip().startswith("fix: check")
    doc = json.loads(render_json(d))
    assert doc["format"] == "fuseci-doctor" and doc["exit_code"] == 3
    assert [(c["name"], c["status"]) for c in doc["checks"]][:4] == [
        ("fuseci", "OK"), ("ncu", "OK"), ("reader", "OK"), ("gpu", "FAIL"),
    ]  # fmt: skip


# --- the CLI on a machine without GPU, ncu or CuPy ------------------------------------------------


@pytest.fixture
def bare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No nvidia-smi, no ncu, whatever this machine has."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("FUSECI_NCU", raising=False)
    monkeypatch.setattr(ncu, "_FALLBACK_GLOBS", ())


def test_cli_without_gpu_or_ncu(bare: None) -> None:
    result = CliRunner().invoke(app, ["doctor"])
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)  # exit 3, no bug
    out = result.stdout
    assert "  ncu              FAIL    ncu (Nsight Compute) not found" in out
    assert "  GPU, driver      FAIL    no NVIDIA GPU visible" in out
    assert "fix: install Nsight Compute" in out and "--gpus all" in out
    assert "  CuPy, CUDA       SKIP    not run: the 'GPU, driver' check failed" in out
    assert out.rstrip().endswith("2 failed, 4 skipped; exit 3")


def test_cli_json_to_stdout(bare: None) -> None:
    result = CliRunner().invoke(app, ["doctor", "--json", "-"])
    assert result.exit_code == 3 and "Traceback" not in result.output
    doc = json.loads(result.stdout)
    statuses = {c["name"]: c["status"] for c in doc["checks"]}
    assert statuses["ncu"] == statuses["gpu"] == "FAIL" and statuses["profiling"] == "SKIP"
    assert "fuseci doctor: " in result.stderr  # the table moved out of the way


def test_cli_json_to_a_file(bare: None, tmp_path: Path) -> None:
    out = tmp_path / "doctor.json"
    result = CliRunner().invoke(app, ["doctor", "--json", str(out), "--ncu", "/no/such/ncu"])
    assert result.exit_code == 3 and "fuseci doctor: " in result.stdout
    doc = json.loads(out.read_text())
    assert "'/no/such/ncu'" in doc["checks"][1]["detail"]


def test_cli_help() -> None:
    result = CliRunner().invoke(app, ["doctor", "--help"])
    assert result.exit_code == 0 and "--json" in result.stdout and "3 a check failed" in result.stdout


# --- for real, on a GPU machine --------------------------------------------------------------------


@pytest.mark.gpu
def test_doctor_on_a_gpu_machine(tmp_path: Path) -> None:
    out = tmp_path / "doctor.json"
    result = CliRunner().invoke(app, ["doctor", "--json", str(out)])
    assert result.exit_code == 0, result.output
    checks = json.loads(out.read_text())["checks"]
    assert [c["name"] for c in checks] == list(diagnosis.CHECKS)
    assert all(c["status"] in ("OK", "WARN") for c in checks), result.output
    readback = checks[-1]["facts"]
    assert readback["in_probe_range"] == readback["kernels"] == 1
    assert readback["dram_bytes_read"] > 0.9 * harness.PROBE_ELEMENTS * 4  # read from DRAM: caches were flushed


def test_the_probe_record_is_written_by_its_declaration_as_before(tmp_path: Path) -> None:
    from fuseci.records.harness import ProbeRecord

    env = {"gpu_name": "NVIDIA H200", "compute_capability": "9.0"}
    facts = {"range": "fuseci:doctor:probe:kernel", "elements": 4194304, "runtime": "cupy", "device_count": 1}
    record = ProbeRecord(ok=True, **facts, env=env, seed=12345, max_abs_err=2.5e-7)
    by_hand = {"format": "fuseci-probe", "ok": True, "error": "", "message": "", **facts, "env": env, "seed": 12345}
    assert record.to_json() == {**by_hand, "max_abs_err": 2.5e-7}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(record.to_json(), indent=2, sort_keys=True) + "\n")
    assert profiling.read_probe(path) == record
    early = ProbeRecord(error=harness.ProbeFailure.NO_CUPY, message="No module named 'cupy'", range="r", elements=4)
    assert sorted(early.to_json()) == ["elements", "error", "format", "message", "ok", "range"]


@pytest.mark.parametrize(
    "text",
    [
        '{"format": "fuseci-probe", "ok": "yes"}',
        '{"format": "other", "ok": true}',
        "[1]",
        "{",
        '{"format": "fuseci-probe", "max_abs_err": NaN}',
    ],
)
def test_a_probe_record_that_is_not_one_reads_as_none(tmp_path: Path, text: str) -> None:
    path = tmp_path / "p.json"
    path.write_text(text)
    assert profiling.read_probe(path) is None
