import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import MINIMAL_SUITE, ROOT

from fuseci.config.model import NcuSettings
from fuseci.config.parse import load_suite
from fuseci.errors import NcuError
from fuseci.measure import profile as ncu
from fuseci.measure import run as measure_run
from fuseci.measure.command import SuiteFiles
from fuseci.measure.run import MeasureOptions

FILES = SuiteFiles(Path("out"), "elementwise")


def test_build_command_exact_argv() -> None:
    argv = ncu.build_command("/opt/ncu", Path("suites/elementwise.yaml"), NcuSettings(), FILES, python="/py")
    assert argv == [
        "/opt/ncu",
        "--config-file", "off",
        "--nvtx",
        "--nvtx-include", "regex:^fuseci:elementwise:.*/",
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
        "--export", "out/elementwise.ncu-rep",
        "--force-overwrite",
        "--log-file", "out/elementwise.ncu.log",
        "/py", "-m", "fuseci.harness", "suites/elementwise.yaml",
        "--record", "out/elementwise.harness.json",
    ]  # fmt: skip


def test_ncu_loads_its_sections_from_an_empty_folder_that_is_removed_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fuseci names every metric it reads: ncu gets an empty ``--section-folder`` for the run
    (its own sections and rules only slow its start), which is gone once ncu has ended."""
    from fuseci.measure import process
    from fuseci.measure.run import measure

    seen: list[tuple[Path, bool, list[str]]] = []

    def fake_run_logged(argv, log_path, timeout_s, cwd=None, env=None, started=None):
        folder = Path(argv[argv.index("--section-folder") + 1])
        seen.append((folder, folder.is_dir(), sorted(p.name for p in folder.iterdir())))
        raise FileNotFoundError(argv[0])

    monkeypatch.setattr(ncu, "find_ncu", lambda explicit=None: "ncu")
    monkeypatch.setattr(ncu, "ncu_version", lambda exe: "2025.3.1.0")
    monkeypatch.setattr(process, "run_logged", fake_run_logged)
    monkeypatch.setattr(process, "start_logged", lambda *a, **k: subprocess.Popen([sys.executable, "-c", "pass"]))
    suite = load_suite(ROOT / "suites" / "elementwise.yaml")
    with pytest.raises(NcuError, match="cannot execute ncu"):
        measure(suite, MeasureOptions(report_dir=tmp_path))
    [(folder, existed, content)] = seen
    assert existed and content == [] and not folder.exists()
    argv = ncu.build_command("ncu", Path("s.yaml"), NcuSettings(), FILES, python="py", sections=Path("/t/s"))
    assert argv[1:5] == ["--config-file", "off", "--section-folder", "/t/s"]


def test_build_command_follows_suite_settings() -> None:
    settings = NcuSettings(clock_control="base", cache_control="none", replay_mode="application")
    argv = ncu.build_command("ncu", Path("s.yaml"), settings, SuiteFiles(Path("out"), "s-1"), python="py")
    assert argv[argv.index("--clock-control") + 1] == "base"
    assert argv[argv.index("--cache-control") + 1] == "none"
    assert argv[argv.index("--replay-mode") + 1] == "application"
    assert argv[argv.index("--nvtx-include") + 1] == r"regex:^fuseci:s\-1:.*/"


def test_missing_ncu_says_how_to_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("FUSECI_NCU", raising=False)
    monkeypatch.setattr(ncu, "_FALLBACK_GLOBS", (str(tmp_path / "nothing" / "ncu"),))
    with pytest.raises(NcuError, match="not found on PATH.*--from-report"):
        ncu.find_ncu()
    with pytest.raises(NcuError, match="not found at '/no/such/ncu'"):
        ncu.find_ncu("/no/such/ncu")


# A stand-in for ncu: behaves as told by FAKE_NCU_MODE, writing to the paths ncu would.
FAKE = """#!{python}
import os, sys, time
argv = sys.argv[1:]
if argv == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2025.3.1.0 (build 1) (public-release)")
    sys.exit(0)
log = argv[argv.index("--log-file") + 1]
report = argv[argv.index("--export") + 1]
record = argv[argv.index("--record") + 1]
mode = os.environ["FAKE_NCU_MODE"]
if mode in ("ok", "none"):  # the harness finished: its record is there
    open(record, "w").write('{{"format": "fuseci-harness-record", "format_version": 1, "suite": "s", "complete": true, "env": {{}}, "cases": {{}}}}')
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
    if mode == "noreport":
        sys.exit(0)
    if mode == "diskfull":
        fh.write("==ERROR== Failed to save report to " + report + ": No space left on device\\n")
        sys.exit(1)
print("Traceback (most recent call last):\\nRuntimeError: kernel exploded")
if mode == "crash":
    sys.exit(134)
if mode == "hang":
    time.sleep(30)
open(report, "wb").write(b"report")
"""


@pytest.fixture
def fake_ncu(tmp_path: Path) -> str:
    path = tmp_path / "ncu"
    path.write_text(FAKE.format(python=sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def _run(fake_ncu: str, tmp_path: Path, mode: str, timeout: float = 20) -> Path | None:
    """``pipeline.profile`` of a one-case suite, with the fake standing in for ncu."""
    suite_file = tmp_path / "s.yaml"
    suite_file.write_text(MINIMAL_SUITE.replace("suite: demo", "suite: s") + f"ncu: {{timeout: {timeout}}}\n")
    options = MeasureOptions(report_dir=tmp_path / "out", ncu=fake_ncu)
    os.environ["FAKE_NCU_MODE"] = mode
    try:
        _, report = measure_run.profile(load_suite(suite_file), options)
        return report
    finally:
        del os.environ["FAKE_NCU_MODE"]


def test_version(fake_ncu: str) -> None:
    assert ncu.ncu_version(fake_ncu) == "2025.3.1.0"


def test_success_writes_report(fake_ncu: str, tmp_path: Path) -> None:
    assert _run(fake_ncu, tmp_path, "ok") == tmp_path / "out" / "s.ncu-rep"


@pytest.mark.parametrize(
    ("mode", "fragment"),
    [
        ("perm", "ERR_NVGPUCTRPERM"),
        ("dcgm", "dcgmi profile --pause"),
        ("crash", "exited with code 134"),
        ("noreport", "wrote no report"),
        ("diskfull", "ran out of space"),
    ],
)
def test_failures_are_explained(fake_ncu: str, tmp_path: Path, mode: str, fragment: str) -> None:
    with pytest.raises(NcuError) as info:
        _run(fake_ncu, tmp_path, mode)
    message = str(info.value)
    assert fragment in message
    assert "s.ncu.log" in message and "s.harness.log" in message


def test_crash_shows_the_application_output(fake_ncu: str, tmp_path: Path) -> None:
    with pytest.raises(NcuError, match="kernel exploded"):
        _run(fake_ncu, tmp_path, "crash")


def test_permission_message_gives_the_fixes(fake_ncu: str, tmp_path: Path) -> None:
    with pytest.raises(NcuError, match="CAP_SYS_ADMIN.*NVreg_RestrictProfilingToAdminUsers=0"):
        _run(fake_ncu, tmp_path, "perm")


def test_nothing_profiled_is_reported_not_raised(fake_ncu: str, tmp_path: Path) -> None:
    assert _run(fake_ncu, tmp_path, "none") is None


def test_timeout(fake_ncu: str, tmp_path: Path) -> None:
    with pytest.raises(NcuError, match="did not finish within 1 s"):
        _run(fake_ncu, tmp_path, "hang", timeout=1)


@pytest.mark.parametrize(
    ("returncode", "log", "written", "outcome"),
    [
        (0, "==PROF== Disconnected\n", True, ncu.ProfileOutcome.REPORT),
        (0, "==WARNING== No kernels were profiled.\n", False, ncu.ProfileOutcome.NOTHING_PROFILED),
        (
            1,
            "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n",
            False,
            ncu.ProfileOutcome.NO_PERMISSION,
        ),
        (
            1,
            "==ERROR== Profiling failed because a driver resource was unavailable.\n",
            False,
            ncu.ProfileOutcome.COUNTERS_BUSY,
        ),
        (134, "", True, ncu.ProfileOutcome.APP_FAILED),
        (-9, "", False, ncu.ProfileOutcome.APP_FAILED),
        (0, "", False, ncu.ProfileOutcome.NO_REPORT),
    ],
)
def test_classify(returncode: int, log: str, written: bool, outcome: ncu.ProfileOutcome) -> None:
    assert ncu.classify(returncode, log, written) is outcome


def test_a_failed_profiled_run_is_explained_on_one_line(tmp_path: Path) -> None:
    """The harness log's last lines join with ' | ': reporters escape a newline in a message, so a
    multi-line tail read as a literal backslash-n on the console."""
    from fuseci.measure.command import SuiteFiles

    files = SuiteFiles(tmp_path, "s")
    files.app_log.write_text("importing\nfuseci-harness: error: imported x (y) from the other side's tree\n")
    run = ncu.finished(3, files)
    message = run.message(files)
    assert "\n" not in message
    assert message.endswith("last lines: importing | fuseci-harness: error: imported x (y) from the other side's tree")


def test_a_suite_may_leave_the_tma_counters_out() -> None:
    """``ncu: {tma: false}``: the two TMA counters (two more replay passes per kernel) are not asked
    for, and the rest of the list is the same."""
    with_tma = ncu.profiler_argv("/opt/ncu", "f", NcuSettings(), FILES)
    without = ncu.profiler_argv("/opt/ncu", "f", NcuSettings(tma=False), FILES)
    metrics = with_tma[with_tma.index("--metrics") + 1].split(",")
    assert without[without.index("--metrics") + 1].split(",") == [
        m
        for m in metrics
        if m
        not in (
            "l1tex__m_xbar2l1tex_read_bytes_pipe_tma.sum",
            "l1tex__m_l1tex2xbar_write_bytes_mem_global_op_tma_st.sum",
        )
    ]
    assert len(metrics) == 25 and [a for a in with_tma if a != with_tma[with_tma.index("--metrics") + 1]] == [
        a for a in without if a != without[without.index("--metrics") + 1]
    ]
