"""The CLI in-process: exit codes, output, files; the README's no-GPU walkthrough."""

import lzma
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import CLEAN_REPORT, REGRESSED_REPORT, invoke, write
from typer.testing import CliRunner

runner = CliRunner()
SUITE = "suites/elementwise.yaml"


def test_clean_report_passes_with_junit(in_root, tmp_path: Path) -> None:
    junit = tmp_path / "j.xml"
    result = invoke(
        "run", SUITE, "--from-report", str(CLEAN_REPORT), "--junit", str(junit), "--json", str(tmp_path / "r.json")
    )
    assert result.exit_code == 0, result.output
    assert "fuseci: 10 variants pass: 88 checks; exit 0" in result.stdout
    root = ET.parse(junit).getroot()
    assert int(root.get("tests")) >= 1 and root.get("failures") == "0" and root.get("errors") == "0"
    assert (tmp_path / "r.json").read_text().startswith("{")


def test_regressed_report_exits_1_and_says_which_gain_dropped(in_root, tmp_path: Path) -> None:
    junit = tmp_path / "j.xml"
    result = invoke("run", SUITE, "--from-report", str(REGRESSED_REPORT), "--junit", str(junit))
    assert result.exit_code == 1, result.output
    messages = [f.get("message") for f in ET.parse(junit).getroot().iter("failure")]
    assert "DRAM bytes gain (unfused ÷ fused) fell from 2.32x to 1.4x (-39.5%); tolerance ±1%" in messages


def test_malformed_suite_exits_3_with_one_line(tmp_path: Path) -> None:
    bad = write(tmp_path / "bad.yaml", "suite: x\ncases: [\n")
    result = invoke("run", str(bad), "--from-report", str(CLEAN_REPORT))
    assert result.exit_code == 3
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and lines[0].startswith("fuseci: error: ")
    assert "Traceback" not in result.output


def test_missing_report_exits_3(in_root, tmp_path: Path) -> None:
    # The report is what is missing, whatever else is: it used to read as its record missing.
    result = invoke("run", SUITE, "--from-report", str(tmp_path / "none.ncu-rep.xz"))
    assert result.exit_code == 3
    assert f"fuseci: error: {tmp_path / 'none.ncu-rep.xz'}: report not found; pass the .ncu-rep" in result.stderr
    assert "harness record not found" not in result.output
    assert "Traceback" not in result.output


def test_a_missing_record_beside_a_report_is_the_record_missing(in_root, tmp_path: Path) -> None:
    report = tmp_path / "elementwise.ncu-rep.xz"
    report.write_bytes(CLEAN_REPORT.read_bytes())
    result = invoke("run", SUITE, "--from-report", str(report))
    assert result.exit_code == 3
    assert f"{tmp_path / 'elementwise.harness.json'}: harness record not found" in result.stderr


def test_truncated_report_exits_3(in_root, tmp_path: Path) -> None:
    raw = lzma.decompress(CLEAN_REPORT.read_bytes())
    cut = tmp_path / "elementwise.ncu-rep"
    cut.write_bytes(raw[:100_000])
    shutil.copy(CLEAN_REPORT.with_name("elementwise.harness.json"), tmp_path)
    junit = tmp_path / "j.xml"
    result = invoke("run", SUITE, "--from-report", str(cut), "--junit", str(junit))
    assert result.exit_code == 3, result.output
    assert "the report is truncated" in result.stderr
    assert ET.parse(junit).getroot().get("errors") == "1"


def test_ncu_missing_exits_3_with_the_fix(in_root, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("fuseci.measure.profile._FALLBACK_GLOBS", ())
    junit = tmp_path / "j.xml"
    result = invoke("run", SUITE, "--report-dir", str(tmp_path / "out"), "--junit", str(junit))
    assert result.exit_code == 3
    assert "ncu (Nsight Compute) not found" in result.stderr
    assert ET.parse(junit).getroot().get("errors") == "1"  # the suite still shows up in CI
    # The exact command that judges the suite here without ncu, where `fuseci run` puts a report.
    report = tmp_path / "out" / "elementwise.ncu-rep"
    command = f"`fuseci run {SUITE} --from-report {report}`"
    assert f"to judge a report recorded on a machine with ncu (its .harness.json beside it): {command}" in result.stderr
    # An earlier run's report is there: the command names it, with the baselines asked for.
    report.parent.mkdir()
    report.write_bytes(b"")
    result = invoke("run", SUITE, "--report-dir", str(tmp_path / "out"), "--baselines", str(tmp_path / "b"))
    command = f"`fuseci run {SUITE} --from-report {report} --baselines {tmp_path / 'b'}`"
    assert f"this machine has the report of an earlier run: {command}" in result.stderr


def test_from_report_needs_exactly_one_suite(in_root) -> None:
    result = invoke("run", SUITE, SUITE, "--from-report", str(CLEAN_REPORT))
    assert result.exit_code == 2
    assert "exactly one suite" in result.stderr


def test_unknown_accept_env_field_is_a_usage_error(in_root) -> None:
    result = invoke("run", SUITE, "--from-report", str(CLEAN_REPORT), "--accept-env", "gpu")
    assert result.exit_code == 2
    assert "unknown field(s) ['gpu']" in result.stderr


def test_baseline_from_other_environment_exits_3_until_accepted(in_root, tmp_path: Path) -> None:
    base = tmp_path / "b" / "nvidia-h200" / "elementwise.json"
    base.parent.mkdir(parents=True)
    base.write_text(
        Path("baselines/nvidia-h200/elementwise.json")
        .read_text()
        .replace('"clock_control": "none"', '"clock_control": "base"')
    )
    args = ["run", SUITE, "--from-report", str(CLEAN_REPORT), "--baselines", str(tmp_path / "b")]
    result = invoke(*args)
    assert result.exit_code == 3
    assert "environment differs: clock_control baseline 'base', now 'none' (NOT COMPARED)" in result.stdout
    assert invoke(*args, "--accept-env", "clock_control").exit_code == 0


def test_corrupt_baseline_exits_3(in_root, tmp_path: Path) -> None:
    base = write(tmp_path / "b" / "nvidia-h200" / "elementwise.json", '{"format_version": 1, ')
    result = invoke("run", SUITE, "--from-report", str(CLEAN_REPORT), "--baselines", str(tmp_path / "b"))
    assert result.exit_code == 3
    assert str(base) in result.stderr and "not JSON" in result.stderr


def test_update_baselines_then_run(in_root, tmp_path: Path) -> None:
    b = str(tmp_path / "b")
    first = invoke("update-baselines", SUITE, "--from-report", str(CLEAN_REPORT), "--baselines", b)
    assert first.exit_code == 0, first.output
    assert "written" in first.stdout and "+ scale_relu_add: new" in first.stdout
    again = invoke("update-baselines", SUITE, "--from-report", str(CLEAN_REPORT), "--baselines", b)
    assert again.exit_code == 0 and "unchanged" in again.stdout
    assert invoke("run", SUITE, "--from-report", str(CLEAN_REPORT), "--baselines", b).exit_code == 0
    assert invoke("run", SUITE, "--from-report", str(REGRESSED_REPORT), "--baselines", b).exit_code == 1


def test_default_suites_are_found(in_root) -> None:
    result = invoke("run", "--from-report", str(CLEAN_REPORT))
    assert result.exit_code in (0, 2), result.output  # 2 only if more than one suite ships


def test_help_documents_exit_codes() -> None:
    result = invoke("run", "--help")
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert "Exit codes: 0" in text and "3 tool, environment or input error" in text


@pytest.mark.parametrize("group", [(), ("ledger",)])
def test_help_lists_each_command_whole(group: tuple[str, ...]) -> None:
    """Each command's line in the list is its help's first clause, never cut with ``...``."""
    result = invoke(*group, "--help", env={"COLUMNS": "80"})
    assert result.exit_code == 0
    listed = result.stdout.split("Commands:")[1]
    assert "..." not in listed
    assert "Check suite files on any machine, without a GPU" in " ".join(listed.split()) or group


def test_a_suite_that_cannot_be_measured_is_said_once_on_one_screen(tmp_path: Path) -> None:
    """stdout and stderr on one screen (a terminal, ``2>&1``): the suite's ERROR block says it;
    on two streams, stderr keeps its one line for logs and scripts."""
    import subprocess
    import sys

    from helpers import ROOT

    argv = [sys.executable, "-m", "fuseci", "run", "suites/elementwise.yaml", "--ncu", str(tmp_path / "no-ncu")]
    one = subprocess.run(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert one.returncode == 3 and one.stdout.count(str(tmp_path / "no-ncu")) == 1, one.stdout
    two = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert two.returncode == 3 and two.stderr.count(str(tmp_path / "no-ncu")) == 1, two.stderr


def test_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0 and result.stdout.startswith("fuseci ")


def test_each_card_is_compared_with_its_own_baseline(in_root) -> None:
    h100 = CLEAN_REPORT.with_name("elementwise-h100.ncu-rep.xz")
    result = invoke("run", SUITE, "--from-report", str(h100))
    assert result.exit_code == 0, result.output
    assert "baseline baselines/nvidia-h100-80gb-hbm3/elementwise.json" in result.stdout
    assert "GPU NVIDIA H100 80GB HBM3 (sm_90)" in result.stdout
