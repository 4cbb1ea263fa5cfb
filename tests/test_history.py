"""fuseci history: gains across run files and their change points, from runs re-analysed from
the recorded reports (clean, clean, regressed, regressed, clean) at distinct times and commits."""

from __future__ import annotations

import json
import math
import os
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from conftest import CLEAN_REPORT, REGRESSED_REPORT, ROOT
from html_doc import parse
from typer.testing import CliRunner

import fuseci.store.runs as run_files
from fuseci import api
from fuseci.cli import app
from fuseci.config.parse import load_suite
from fuseci.judge import history

START = datetime(2026, 11, 20, 9, 0, tzinfo=timezone.utc)
#: The recorded report behind each run, oldest first.
SEQUENCE = [CLEAN_REPORT, CLEAN_REPORT, REGRESSED_REPORT, REGRESSED_REPORT, CLEAN_REPORT]
SUITE = "suites/elementwise.yaml"


def _sha(i: int) -> str:
    return f"{i + 1}" * 7 + "0" * 33


def invoke(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five run files, a day apart, each with its own commit."""
    directory = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        for i, report in enumerate(SEQUENCE):
            mp.setattr(run_files, "_now", lambda i=i: START + timedelta(days=i))
            mp.setenv("GITHUB_SHA", _sha(i))
            result = invoke("run", "suites/elementwise.yaml", "--from-report", report, "--results-dir", directory)
            assert result.exit_code == (1 if report == REGRESSED_REPORT else 0), result.output
    assert len(list(directory.glob("*.json"))) == 5
    return directory


def test_change_points_are_where_the_level_moves() -> None:
    assert history.change_points([2.32, 2.32, 1.40, 1.40, 2.32], 0.03) == [2, 4]
    assert history.change_points([3.0, 3.0, 3.0], 0.0) == []
    assert history.change_points([5.0], 0.15) == []


def test_noise_inside_the_gate_is_no_change_but_a_lasting_step_is() -> None:
    wobble = [1.0 + 0.004 * math.sin(i * 1.7) for i in range(30)]  # ±0.4% against a ±3% gate
    assert history.change_points(wobble, 0.03) == []
    stepped = [v * (0.95 if i >= 18 else 1.0) for i, v in enumerate(wobble)]  # a lasting 5% drop
    assert history.change_points(stepped, 0.03) == [18]


def test_history_prints_every_change_point_with_its_commit(in_root, runs_dir: Path) -> None:
    result = invoke("history", runs_dir, SUITE)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"fuseci: history of 5 runs in {runs_dir}, 2026-11-20 09:00 UTC to 2026-11-24 09:00 UTC")
    assert (
        "  elementwise: scale_relu_add/fused DRAM bytes gain stepped from 2.32x to 1.4x (-39.6%, beyond its ±1% gate) "
        "at commit 3333333 (2026-11-22 09:00 UTC)"
    ) in lines
    assert (
        "  elementwise: scale_relu_add/fused DRAM bytes gain stepped from 1.4x to 2.32x (+65.6%, beyond its ±1% gate) "
        "at commit 5555555 (2026-11-24 09:00 UTC)"
    ) in lines
    changes = [line for line in lines if "stepped from" in line]
    assert len(changes) == 8 and all("scale_relu_add/fused" in line for line in changes)
    assert {line.rsplit("at commit ", 1)[1][:7] for line in changes} == {"3333333", "5555555"}
    assert lines[-1] == "fuseci: 8 change points in 20 gains over 5 runs"


def test_history_model_has_each_gain_per_run(in_root, runs_dir: Path) -> None:
    found = api.history(runs_dir, gates=[load_suite(SUITE)])
    assert [r.commit for r in found.runs] == [_sha(i) for i in range(5)]
    dram = next(s for s in found.series if (s.case, s.quantity) == ("scale_relu_add", "dram__bytes.sum"))
    assert dram.gpu == "NVIDIA H200" and dram.variant == "fused" and dram.tolerance == pytest.approx(0.01)
    assert [round(v, 2) for v in dram.values] == [2.32, 2.32, 1.4, 1.4, 2.32]
    assert [c.index for c in dram.changes] == [2, 4] and all(c.beyond_tolerance for c in dram.changes)
    assert [(s.start, s.stop) for s in dram.segments] == [(0, 2), (2, 4), (4, 5)]
    steady = next(s for s in found.series if (s.case, s.quantity) == ("bias_gelu", "dram__bytes.sum"))
    assert steady.changes == () and len(steady.values) == 5


def test_history_html_draws_a_trend_per_gain_and_marks_the_changes(in_root, runs_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "history.html"
    result = invoke("history", runs_dir, SUITE, "--html", out)
    assert result.exit_code == 0, result.output
    text = out.read_text()
    root, ids = parse(text)
    figures = root.find_all("figure", cls="chart")
    assert len(figures) == 20 and {f.attrs["data-kind"] for f in figures} == {"trend"}
    assert all(f.find_all("svg")[0].find_all("path") for f in figures)
    assert len(ids) == len(set(ids))
    (changes,) = root.find_all("section", id="changes")
    assert len(changes.find_all("li")) == 8
    assert "at commit 3333333" in changes.all_text()
    # The scale_relu_add DRAM bytes chart labels its runs with their commits and marks two changes.
    chart = next(f for f in figures if "DRAM bytes gain" in f.all_text() and f.attrs["id"].startswith("case-0-"))
    labels = " ".join(t.all_text() for t in chart.find_all("text"))
    assert all(_sha(i)[:7] in labels for i in range(5))
    assert labels.count("change") == 2
    assert "http:" not in text and "https:" not in text and "<script" not in text


def test_last_and_suite_narrow_the_history(in_root, runs_dir: Path) -> None:
    result = invoke("history", runs_dir, SUITE, "--last", 2, "--suite", "elementwise")
    assert result.exit_code == 0, result.output
    assert "history of 2 runs" in result.stdout
    assert "stepped from 1.4x to 2.32x" in result.stdout and "stepped from 2.32x to 1.4x" not in result.stdout


def test_unknown_suite_is_a_usage_error(in_root, runs_dir: Path) -> None:
    result = invoke("history", runs_dir, "--suite", "nope")
    assert result.exit_code == 2
    assert "--suite nope: no run in" in result.stderr and "the runs measured elementwise" in result.stderr


def test_without_the_suite_file_gains_are_followed_ungated(in_root, runs_dir: Path) -> None:
    result = invoke("history", runs_dir)  # suites/elementwise.yaml, which the runs recorded, is right here
    assert result.exit_code == 0, result.output
    (note,) = [line for line in result.stdout.splitlines() if line.startswith("fuseci: note: ")]
    assert note == (
        "fuseci: note: no suite file given, so every gain is followed without its gate's tolerance; fuseci history "
        "opens no path a run file names: pass the suite files after the results directory "
        f"(fuseci history {runs_dir} suites/*.yaml)"
    )
    assert "(-39.6%, not gated)" in result.stdout


@pytest.mark.parametrize("case", ["missing", "empty", "file", "malformed"])
def test_unreadable_inputs_exit_3(case: str, runs_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "runs"
    if case == "empty":
        target.mkdir()
    elif case == "file":
        target.write_text("{}")
    elif case == "malformed":
        target.mkdir()
        (target / "20261120T090000Z-nvidia-h200.json").write_text(json.dumps({"format": "fuseci-run"}))
    result = invoke("history", target)
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith(f"fuseci: error: {target}") and len(result.stderr.splitlines()) == 1
    assert "Traceback" not in result.output


def test_history_needs_no_gpu_and_says_where_its_runs_came_from(in_root, runs_dir: Path) -> None:
    names = sorted(p.name for p in runs_dir.glob("*.json"))
    assert names[0] == "20261120T090000Z-nvidia-h200-1111111.json"
    assert "GITHUB_SHA" not in os.environ or os.environ["GITHUB_SHA"] not in {_sha(i) for i in range(5)}
    found = api.history(runs_dir)
    assert [Path(r.path).name for r in found.runs] == names


def test_the_gates_come_from_the_suite_file_named_and_it_says_so(in_root, runs_dir: Path) -> None:
    result = invoke("history", runs_dir, SUITE)
    assert result.exit_code == 0, result.output
    (note,) = [line for line in result.stdout.splitlines() if line.startswith("fuseci: note: ")]
    assert note == f"fuseci: note: gates from the suite files given: elementwise ({SUITE})"
    assert "beyond its ±1% gate" in result.stdout


def test_a_suite_file_of_no_run_is_a_usage_error(in_root, runs_dir: Path) -> None:
    result = invoke("history", runs_dir, "suites/reduction.yaml")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("fuseci: error: suites/reduction.yaml: suite 'reduction' is in no run in ")


def _copy_runs(runs_dir: Path, target: Path, edit) -> Path:
    target.mkdir()
    for path in sorted(runs_dir.glob("*.json")):
        doc = json.loads(path.read_text())
        edit(doc)
        (target / path.name).write_text(json.dumps(doc))
    return target


@pytest.mark.parametrize("where", ["secret", "relative", "fifo", "dev zero"])
def test_history_opens_no_path_a_run_file_names(runs_dir: Path, tmp_path: Path, monkeypatch, where: str) -> None:
    """A run file's ``suite_path`` is a label: a token file, ``.netrc`` or ``/etc/passwd`` it
    names is never opened, so nothing of it can be printed (``compare`` refuses such paths)."""
    secret = tmp_path / ".netrc"
    secret.write_text("machine github.com login ci password ghp_SECRETTOKEN123\n")
    if where == "fifo":
        os.mkfifo(tmp_path / "pipe.yaml")
    named = {"secret": str(secret), "relative": ".netrc", "fifo": "pipe.yaml", "dev zero": "/dev/zero"}[where]

    def edit(doc: dict) -> None:
        doc["suites"]["elementwise"]["suite_path"] = named

    runs = _copy_runs(runs_dir, tmp_path / "runs", edit)
    monkeypatch.chdir(tmp_path)
    opened: list[str] = []
    real_open = os.open

    def spy(path, *args, **kwargs):  # every file the command opens, by descriptor or by open()
        opened.append(os.path.realpath(path) if isinstance(path, (str, Path)) else str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    result = invoke("history", runs)
    assert result.exit_code == 0, result.output
    assert "ghp_" not in result.output and "SECRET" not in result.output
    assert "(-39.6%, not gated)" in result.stdout
    assert not {os.path.realpath(tmp_path / p) for p in (".netrc", "pipe.yaml")} & set(opened)
    assert "/dev/zero" not in opened


def test_names_from_run_files_print_as_one_line_each(runs_dir: Path, tmp_path: Path, monkeypatch) -> None:
    """A GPU name is data: with several GPUs it is in every change line, shown, never a line (or a
    workflow command) of its own."""
    hostile = "GPU\n::add-mask::hunter2\x1b[2J\u202e"

    def edit(doc: dict) -> None:
        doc["gpu_name"] = hostile
        for entry in doc["suites"].values():
            entry["record"]["env"]["gpu_name"] = hostile
            for k in entry["kernels"]:
                k["device__attribute_display_name"] = hostile

    runs = _copy_runs(runs_dir, tmp_path / "runs", edit)
    newest = max(runs_dir.glob("*.json"))
    (runs / newest.name.replace("2026", "2027")).write_bytes(newest.read_bytes())  # a second GPU, a year on
    monkeypatch.chdir(tmp_path)
    result = invoke("history", runs)
    assert result.exit_code == 0, result.output
    assert "GPU\\n::add-mask::hunter2\\x1b[2J\\u202e" in result.stdout
    assert not re.search(r"^\s*::add-mask", result.stdout, re.MULTILINE) and "\x1b" not in result.stdout
