"""``fuseci bench`` without a GPU: the argv, the derived figures, exit codes and error paths.

The harness is replaced by a fake runner that writes a record (or fails) as the real one would;
tests/test_bench_gpu.py runs the real one.
"""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import DATA, ELEMENTWISE, REPORTS, write
from typer.testing import CliRunner

from fuseci import api
from fuseci.cli import app
from fuseci.config.parse import load_suite
from fuseci.errors import BenchError
from fuseci.harness.event_timing import MAX_INPUT_SETS, input_set_count, rotation_seed
from fuseci.measure import bench, process
from fuseci.measure.command import Mode, SuiteFiles, harness_argv
from fuseci.records.harness import CaseRecord, CaseStatus, HarnessRecord, VariantTiming, read_record, write_record

TINY = DATA / "suites" / "tiny.yaml"
runner = CliRunner()
H200_L2 = 62_914_560


def _timing(variant: str, median_us: float, min_bytes: int = 12_000_036) -> VariantTiming:
    """12_000_036 bytes: tiny.yaml's two inputs and one output of 1000003 float32 each."""
    ns = median_us * 1e3
    return VariantTiming(variant, ns, 0.95 * ns, 1.2 * ns, 0.02 * ns, 30, 32, min_bytes)


def _record(*, wrong: bool = False, suite: str = "tiny") -> HarnessRecord:
    if wrong:
        case = CaseRecord("scale_relu_add", CaseStatus.WRONG, "wrong result: fused output 0 vs unfused: ...")
    else:
        timings = (_timing("unfused", 30.0), _timing("fused", 10.0), _timing("defused", 20.0))
        case = CaseRecord("scale_relu_add", CaseStatus.OK, timings=timings)
    return HarnessRecord(
        suite=suite,
        env={"gpu_name": "NVIDIA H200", "compute_capability": "9.0", "l2_bytes": H200_L2},
        cases={"scale_relu_add": case},
        complete=True,
        copy_bandwidth=4.0e12,
    )


def _fake_harness(monkeypatch: pytest.MonkeyPatch, record: HarnessRecord | None, rc: int = 0, log: str = "") -> list:
    """Replace the harness by a process that exits with ``rc``, after writing ``log`` and ``record``
    where the argv says."""
    calls: list[list[str]] = []
    start = process.start_logged

    def start_logged(argv: list[str], log_path: Path, cwd: Path | None = None, env: object = None) -> object:
        calls.append(argv)
        if record is not None:
            write_record(record, Path(argv[argv.index("--record") + 1]))
        script = f"import sys; print({log!r}, end=''); sys.exit({rc})"
        return start([sys.executable, "-c", script], log_path, cwd)

    monkeypatch.setattr(process, "start_logged", start_logged)
    return calls


# --- the harness's pure parts ------------------------------------------------------------------


def test_input_sets_span_four_times_l2() -> None:
    assert input_set_count(8_000_024, H200_L2) == 32  # 32 x 8 MB >= 4 x 60 MiB
    assert input_set_count(2 * 268_435_456, H200_L2) == 2  # at least two, even for large inputs
    assert input_set_count(4, H200_L2) == MAX_INPUT_SETS  # bounded for tiny inputs
    for set_bytes in (1, 1000, 8_000_024, 60_000_000):
        n = input_set_count(set_bytes, H200_L2)
        assert n == MAX_INPUT_SETS or n * set_bytes >= 4 * H200_L2


def test_rotation_seeds_keep_set_zero_and_differ() -> None:
    assert rotation_seed(12345, 0) == 12345
    seeds = {rotation_seed(12345, k) for k in range(100)}
    assert len(seeds) == 100 and all(0 <= s < 2**63 for s in seeds)
    assert rotation_seed(12345, 3) == rotation_seed(12345, 3)


# --- bench.py ------------------------------------------------------------------------------------


def test_command_is_an_argument_list() -> None:
    files = SuiteFiles(Path("out"), "tiny").harness(Mode.BENCH)
    assert harness_argv(Mode.BENCH, files.record, Path("s/tiny.yaml"), repeats=30, python="/py") == [
        "/py", "-m", "fuseci.harness", "s/tiny.yaml",
        "--record", "out/tiny.bench.json",
        "--time", "--repeats", "30",
    ]  # fmt: skip
    assert files.log == Path("out/tiny.bench.log")


def test_figures_derived_from_the_record() -> None:
    result = bench.result_from_record(_record(), load_suite(TINY), Path("r.json"))
    (case,) = result.cases
    rows = {r.timing.variant: r for r in case.rows}
    assert [r.timing.variant for r in case.rows] == ["unfused", "fused", "defused"]
    assert rows["unfused"].speedup is None
    assert rows["fused"].speedup == pytest.approx(3.0) and rows["defused"].speedup == pytest.approx(1.5)
    assert rows["fused"].achieved_bandwidth == pytest.approx(12_000_036 / 10e-6)
    assert rows["fused"].copy_fraction == pytest.approx(12_000_036 / 10e-6 / 4.0e12)


def test_cases_come_in_suite_order_although_the_file_sorts_them(tmp_path: Path) -> None:
    timings = (_timing("unfused", 30.0), _timing("fused", 10.0))
    cases = {cid: CaseRecord(cid, CaseStatus.OK, timings=timings) for cid in ("relu_bn_add_relu", "scale_relu_add")}
    write_record(HarnessRecord("elementwise", {}, cases, complete=True, copy_bandwidth=1e12), tmp_path / "r.json")
    result = bench.result_from_record(read_record(tmp_path / "r.json"), load_suite(ELEMENTWISE), tmp_path / "r.json")
    assert [c.case for c in result.cases] == ["scale_relu_add", "relu_bn_add_relu"]


def test_a_record_without_the_copy_bandwidth_is_not_a_bench_record() -> None:
    """fuseci 0.1.0's profiled records kept the timed pass's timings but not its copy bandwidth."""
    record = read_record(DATA / "legacy" / "elementwise-regressed.harness.json")
    with pytest.raises(BenchError, match="was not written by `python -m fuseci.harness --time`"):
        bench.result_from_record(record, load_suite(ELEMENTWISE), Path("x.json"))


def test_a_profiled_record_of_fuseci_run_gives_the_figures_of_its_timed_pass() -> None:
    record = read_record(REPORTS / "elementwise.harness.json")
    result = bench.result_from_record(record, load_suite(ELEMENTWISE), Path("x.json"))
    assert result.copy_bandwidth and next(c.case for c in result.cases) == "scale_relu_add"


def test_record_of_another_suite_is_refused() -> None:
    with pytest.raises(BenchError, match="record of suite 'other', not 'tiny'"):
        bench.result_from_record(_record(suite="other"), load_suite(TINY), Path("x.json"))


def test_exit_codes() -> None:
    suite = load_suite(TINY)
    ok = bench.result_from_record(_record(), suite, Path("r"))
    wrong = bench.result_from_record(_record(wrong=True), suite, Path("r"))
    broken = bench.failed(suite, "harness crashed")
    assert bench.exit_code([ok]) == 0
    assert bench.exit_code([ok, wrong]) == 1
    assert bench.exit_code([ok, broken]) == 3
    assert bench.exit_code([wrong, broken]) == 1  # a wrong result wins, as in `fuseci run`


def test_timeout_stops_the_harness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite = load_suite(write(tmp_path / "s.yaml", TINY.read_text() + "ncu: {timeout: 1}\n"))
    script = "import time; print('started', flush=True); time.sleep(60)"
    monkeypatch.setattr("fuseci.api.timing.harness_argv", lambda *a, **k: [sys.executable, "-c", script])
    with pytest.raises(BenchError) as info:
        api.bench(suite, api.BenchOptions(report_dir=tmp_path / "out"))
    message = str(info.value)
    assert "did not finish within 1 s (suite key ncu.timeout)" in message
    assert str(tmp_path / "out" / "tiny.bench.log") in message and "last lines: started" in message


def test_crash_quotes_the_log_on_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = (
        "import sys; print('Traceback (most recent call last):'); print('RuntimeError: kernel exploded'); sys.exit(134)"
    )
    monkeypatch.setattr("fuseci.api.timing.harness_argv", lambda *a, **k: [sys.executable, "-c", script])
    with pytest.raises(BenchError) as info:
        api.bench(load_suite(TINY), api.BenchOptions(report_dir=tmp_path))
    message = str(info.value)
    assert "exited with code 134" in message and "\n" not in message
    assert message.endswith("last lines: Traceback (most recent call last): | RuntimeError: kernel exploded")


def test_incomplete_record_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = _record()
    _fake_harness(monkeypatch, HarnessRecord(record.suite, record.env, record.cases, complete=False))
    with pytest.raises(BenchError, match="stopped before its last case"):
        api.bench(load_suite(TINY), api.BenchOptions(report_dir=tmp_path))


def test_missing_python_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("fuseci.api.timing.harness_argv", lambda *a, **k: [str(tmp_path / "no-python")])
    with pytest.raises(BenchError, match="cannot execute .*no-python"):
        api.bench(load_suite(TINY), api.BenchOptions(report_dir=tmp_path))


# --- the CLI -------------------------------------------------------------------------------------


def test_cli_prints_the_table_and_writes_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_harness(monkeypatch, _record())
    out = tmp_path / "b.json"
    result = runner.invoke(app, ["bench", str(TINY), "--report-dir", str(tmp_path), "--json", str(out)])
    assert result.exit_code == 0, result.output
    (argv,) = calls
    assert argv[:4] == [sys.executable, "-m", "fuseci.harness", str(TINY)] and "--time" in argv
    assert "copy bandwidth 4000 GB/s" in result.stdout
    assert result.stdout.rstrip().endswith("fuseci bench: 3 variants timed; exit 0")
    doc = json.loads(out.read_text())
    fused = doc["suites"][0]["cases"][0]["variants"][1]
    assert fused["variant"] == "fused" and math.isclose(fused["speedup"], 3.0)
    assert doc["suites"][0]["copy_bandwidth"] == 4.0e12 and doc["exit_code"] == 0


def test_cli_wrong_result_exits_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_harness(monkeypatch, _record(wrong=True))
    result = runner.invoke(app, ["bench", str(TINY), "--report-dir", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert "WRONG        scale_relu_add: wrong result" in result.stdout


def test_cli_failed_harness_exits_3_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_harness(monkeypatch, None, rc=3, log="fuseci-harness: case scale_relu_add\nboom: the device fell off\n")
    result = runner.invoke(app, ["bench", str(TINY), "--report-dir", str(tmp_path)])
    assert result.exit_code == 3, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fuseci: error: the timed run exited with code 3")
    assert str(tmp_path / "tiny.bench.log") in lines[0] and "boom: the device fell off" in lines[0]
    assert "Traceback" not in result.output
    assert "fuseci bench: suite tiny" in result.stdout and result.stdout.rstrip().endswith("exit 3")


def test_cli_without_cupy_runs_the_real_harness_and_exits_3(tmp_path: Path) -> None:
    try:
        import cupy  # noqa: F401

        pytest.skip("CuPy is installed: this checks the message without it")
    except ImportError:
        pass
    result = runner.invoke(app, ["bench", str(TINY), "--report-dir", str(tmp_path)])
    assert result.exit_code == 3, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "neither CuPy (No module named 'cupy') nor PyTorch" in line and str(tmp_path / "tiny.bench.log") in line


def test_cli_repeats_below_minimum_is_a_usage_error() -> None:
    result = runner.invoke(app, ["bench", str(TINY), "--repeats", "2"])
    assert result.exit_code == 2


def test_harness_refuses_repeats_without_time(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "fuseci.harness", str(TINY), "--record", str(tmp_path / "r"), "--repeats", "5"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2 and "--repeats, --no-checks and --after need --time" in proc.stderr


def test_bench_help_documents_exit_codes() -> None:
    result = runner.invoke(app, ["bench", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert "Exit codes: 0 every variant timed; 1 a variant computed a wrong result" in text
