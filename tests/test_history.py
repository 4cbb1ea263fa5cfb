"""fuseci history: gains across run files and their change points, from runs re-analysed from
the recorded reports (clean, clean, regressed, regressed, clean) at distinct times and commits."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from helpers import CLEAN_REPORT, REGRESSED_REPORT, ROOT, invoke, parse

from fuseci import api
from fuseci.api import trends
from fuseci.config.parse import load_suite
from fuseci.judge import history
from fuseci.reporters import history as history_reporter

START = datetime(2026, 11, 20, 9, 0, tzinfo=timezone.utc)
#: The recorded report behind each run, oldest first.
SEQUENCE = [CLEAN_REPORT, CLEAN_REPORT, REGRESSED_REPORT, REGRESSED_REPORT, CLEAN_REPORT]
SUITE = "suites/elementwise.yaml"


def _sha(i: int) -> str:
    """The commit of run ``i`` of docs/REPORTS.md's walkthrough."""
    return f"{i + 1}" * 7


def _tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def walkthrough(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str, str]:
    """docs/REPORTS.md's walkthrough, as ``tools/readme_screenshots.py`` makes its pages (the
    screenshots aside): five runs a day apart, each at its own commit, from the two recordings
    (``--commit`` and ``--time``). Its directory, its history page, what it printed and what the
    document shows."""
    tool = _tool("readme_screenshots")
    work = tmp_path_factory.mktemp("walkthrough")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        _, shown = tool.walkthrough((ROOT / tool.GUIDE).read_text(encoding="utf-8"))
        _, page, printed = tool.pages(ROOT, work)
    return work, page, printed, shown


@pytest.fixture(scope="module")
def runs_dir(walkthrough: tuple[Path, Path, str, str]) -> Path:
    """The walkthrough's five run files: clean, clean, regressed, regressed, clean."""
    directory = walkthrough[0] / "runs"
    assert len(list(directory.glob("*.json"))) == 5
    return directory


def test_the_walkthrough_prints_what_the_docs_show_and_makes_the_pictured_page(
    walkthrough: tuple[Path, Path, str, str],
) -> None:
    _, page, printed, shown = walkthrough
    assert printed == shown
    root, _ = parse(page.read_text(encoding="utf-8"))
    assert len(root.find_all("figure", cls="chart")) == 20  # a chart per gain (20 gains, 8 change points)


def test_commit_and_time_are_checked_and_need_a_results_dir(in_root, tmp_path: Path) -> None:
    report = ("suites/elementwise.yaml", "--from-report", CLEAN_REPORT)
    for args, message in (
        (("--commit", "abc"), "--commit 'abc': not a commit hash"),
        (("--time", "2026-11-20 09:00"), "--time '2026-11-20 09:00': not a UTC time"),
    ):
        result = invoke("run", *report, "--results-dir", tmp_path / "runs", *args)
        assert result.exit_code == 2 and message in result.stderr, result.output
    result = invoke("run", *report, "--commit", "1111111")
    assert result.exit_code == 2 and "pass --results-dir DIR too" in result.stderr, result.output
    result = invoke(
        "run", "suites/elementwise.yaml", "--results-dir", tmp_path / "runs", "--time", "2026-11-20T09:00:00Z"
    )
    assert result.exit_code == 2 and "--time stamps a run re-analysed with --from-report" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_runs_re_analysed_from_recordings_read_in_the_order_they_were_recorded(
    in_root, tmp_path: Path, monkeypatch
) -> None:
    # They were stamped with the time they were re-analysed and the commit checked out then, so a
    # history of recordings needed its clock and commit faked.
    monkeypatch.setenv("GITHUB_SHA", _sha(8))
    directory = tmp_path / "runs"
    recorded = [CLEAN_REPORT.parent / "elementwise-h100.ncu-rep.xz", CLEAN_REPORT, REGRESSED_REPORT]
    for report in reversed(recorded):  # re-analysed newest first: the order must come from the recordings
        result = invoke("run", "suites/elementwise.yaml", "--from-report", report, "--results-dir", directory, "-q")
        assert result.exit_code in (0, 1), result.output
    names = sorted(p.name for p in directory.glob("*.json"))
    assert names == [
        "20261126T172808Z-nvidia-h100-80gb-hbm3.json",
        "20261127T043413Z-nvidia-h200.json",
        "20261127T043517Z-nvidia-h200.json",
    ]
    doc = json.loads((directory / names[1]).read_text())
    assert doc["created"] == "2026-11-27T04:34:13Z" and doc["git_commit"] is None
    found = api.history(directory)
    assert [r.short_commit for r in found.runs] == ["no commit"] * 3
    dram = next(
        s for s in found.series if (s.gpu, s.case, s.quantity) == ("NVIDIA H200", "scale_relu_add", "dram__bytes.sum")
    )
    assert [round(v, 2) for v in dram.values] == [2.32, 1.4]


def test_change_points_are_where_the_level_moves() -> None:
    assert history.change_points([2.32, 2.32, 1.40, 1.40, 2.32], 0.03) == [2, 4]
    assert history.change_points([3.0, 3.0, 3.0], 0.0) == []
    assert history.change_points([5.0], 0.15) == []


def test_noise_inside_the_gate_is_no_change_but_a_lasting_step_is() -> None:
    wobble = [1.0 + 0.004 * math.sin(i * 1.7) for i in range(30)]  # ±0.4% against a ±3% gate
    assert history.change_points(wobble, 0.03) == []
    stepped = [v * (0.95 if i >= 18 else 1.0) for i, v in enumerate(wobble)]  # a lasting 5% drop
    assert history.change_points(stepped, 0.03) == [18]


def _noisy(n: int, sigma: float, seed: int = 0) -> list[float]:
    """A stable gain of 2.3x with log-normal noise of ``sigma`` (0.002: 0.2% per run)."""
    rng = np.random.default_rng(seed)
    return [float(v) for v in 2.3 * np.exp(rng.normal(0.0, sigma, n))]


def _evaluations(values: list[float], monkeypatch: pytest.MonkeyPatch) -> int:
    """How many stretches the change-point search costs for ``values`` (a count, not a time)."""
    counted = [0]
    cost = history._Sums.cost

    def counting(self: history._Sums, a: object, b: object) -> object:
        out = cost(self, a, b)
        counted[0] += int(np.size(out))
        return out

    with monkeypatch.context() as m:
        m.setattr(history._Sums, "cost", counting)
        assert history.change_points(values, 0.03) == []
    return counted[0]


def test_change_points_of_a_long_stable_history_grow_as_n_log_n(monkeypatch: pytest.MonkeyPatch) -> None:
    # A noisy, stable gain is the worst case of a PELT search over every run (it prunes nothing
    # there: every pair of runs, 28 s for 2,000 of them). Eight times the runs must cost about
    # eight times log as much, not 64 times; the times are in docs/BENCHMARKS.md.
    small = _evaluations(_noisy(2000, 0.002), monkeypatch)
    large = _evaluations(_noisy(16_000, 0.002, seed=1), monkeypatch)
    assert small < 2000 * 2000 / 10
    assert large / small < 8 * 1.5, (small, large)


def test_a_dip_of_a_few_runs_inside_a_long_history_is_found() -> None:
    # Plain binary segmentation misses a short dip in a long series; the narrowest interval
    # over the threshold finds it.
    values = _noisy(2000, 0.002)
    for length in (2, 5, 30):
        dipped = [v * (0.9 if 1234 <= i < 1234 + length else 1.0) for i, v in enumerate(values)]
        assert history.change_points(dipped, 0.03) == [1234, 1234 + length]


def test_change_points_agree_with_an_exact_search() -> None:
    # The same cost and penalty minimised over every run (ruptures' PELT, exact but quadratic on
    # a stable series): the answers agree on random histories of steps up and down.
    ruptures = pytest.importorskip("ruptures")
    rng = np.random.default_rng(7)
    scale = math.log1p(0.03)
    agree = 0
    for _ in range(100):
        units = rng.normal(0.0, 0.3, 300)
        for _ in range(int(rng.integers(0, 6))):
            units[int(rng.integers(1, 300)) :] += rng.choice([-1, 1]) * rng.uniform(1, 6)
        values = list(2.0 * np.exp(units * scale))
        signal = (units - np.median(units)).reshape(-1, 1)
        exact = ruptures.KernelCPD(kernel="linear", min_size=1).fit(signal).predict(pen=history.PENALTY)[:-1]
        agree += history.change_points(values, 0.03) == [int(e) for e in exact]
    assert agree >= 97


@pytest.mark.parametrize(
    "values",
    [
        [2.0] * 5 + [1.797e308] * 5 + [5e-324] * 5,
        [1.797e308] * 10,
        [5e-324, 5e-324, 1.0, 1.0],
        [1.5e308, 1.6e308, 1.7e308, 1.797e308, 1e-300, 1e-300, 1e-300],
    ],
)
def test_any_finite_positive_gain_is_searched(values: list[float]) -> None:
    found = history.change_points(values, 0.01)
    assert all(0 < i < len(values) for i in found)
    levels = [
        s.level
        for s in history.series_of(("g", "s", "c", "v", "q"), [(_point(), v) for v in values], 0.01, "±1%").segments
    ]
    assert all(math.isfinite(level) and level > 0 for level in levels)
    if values[0] == 2.0:
        assert found == [5, 10]


def _point() -> history.RunPoint:
    return history.RunPoint(path="r.json", created=START, commit=None)


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
    assert labels.split().count("fell") == 1 and labels.split().count("rose") == 1
    assert "http:" not in text and "https:" not in text and "<script" not in text


def test_a_gain_that_recovers_is_not_marked_as_one_that_fell(in_root, runs_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "history.html"
    assert invoke("history", runs_dir, "--html", out).exit_code == 0
    root, _ = parse(out.read_text())
    (changes,) = root.find_all("section", id="changes")
    items = {li.all_text().split(" at commit ")[0]: li for li in changes.find_all("li")}
    fell = next(li for text, li in items.items() if "DRAM bytes gain stepped from 2.32x to 1.4x" in text)
    rose = next(li for text, li in items.items() if "DRAM bytes gain stepped from 1.4x to 2.32x" in text)
    assert "t-bad" in fell.classes() and fell.find_all("span", cls="badge")[0].all_text() == "fell beyond gate"
    assert "t-good" in rose.classes() and rose.find_all("span", cls="badge")[0].all_text() == "rose beyond gate"
    found = api.history(runs_dir)
    dram = next(s for s in found.series if (s.case, s.quantity) == ("scale_relu_add", "dram__bytes.sum"))
    assert [c.rose for c in dram.changes] == [False, True]


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


def test_a_suite_file_of_no_run_beside_others_is_a_note_and_the_others_go_on(in_root, runs_dir: Path) -> None:
    """`fuseci history runs/ suites/*.yaml` in CI names suites added since the runs, or skipped
    by them: each is a note, and the suites of the runs are followed with their gates."""
    result = invoke("history", runs_dir, SUITE, "suites/mutants.yaml", "suites/reduction.yaml")
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stdout.splitlines() if line.startswith("fuseci: note: ")]
    assert notes[:2] == [
        f"fuseci: note: suites/{name}.yaml: suite '{name}' is in no run in {runs_dir}: left out "
        "(a suite added since, or one the runs skipped)"
        for name in ("mutants", "reduction")
    ]
    assert notes[2] == f"fuseci: note: gates from the suite files given: elementwise ({SUITE})"
    assert "beyond its ±1% gate" in result.stdout
    assert result.stderr == ""


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


@pytest.fixture(scope="module")
def many_runs(tmp_path_factory: pytest.TempPathFactory, runs_dir: Path) -> Path:
    """200 run files of the elementwise suite, an hour apart: copies of the five recorded runs
    (enough to be read by two worker processes, :data:`fuseci.api.trends._RUNS_PER_WORKER`)."""
    directory = tmp_path_factory.mktemp("many")
    docs = [json.loads(p.read_text()) for p in sorted(runs_dir.glob("*.json"))]
    for i in range(200):
        doc = docs[i * len(docs) // 200]
        when = START + timedelta(hours=i)
        doc["created"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        (directory / f"{when:%Y%m%dT%H%M%SZ}-nvidia-h200.json").write_text(json.dumps(doc))
    return directory


@pytest.fixture(scope="module")
def many_runs_history(many_runs: Path) -> history.History:
    """The history of :func:`many_runs`, read from the repository root (by several processes)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        return api.history(many_runs)


def test_history_of_hundreds_of_runs_finds_each_step(many_runs_history: history.History) -> None:
    # Its time (30 s here before, and minutes for thousands of runs) is in docs/BENCHMARKS.md.
    found = many_runs_history
    dram = next(s for s in found.series if (s.case, s.quantity) == ("scale_relu_add", "dram__bytes.sum"))
    assert len(dram.values) == 200 and [c.index for c in dram.changes] == [80, 160]


def test_history_read_by_several_processes_is_the_one_read_by_one(
    in_root, many_runs: Path, many_runs_history: history.History, monkeypatch
) -> None:
    together = many_runs_history
    monkeypatch.setattr(trends, "_RUNS_PER_WORKER", 10**9)
    alone = api.history(many_runs)
    assert together == alone


def test_an_unreadable_run_among_many_names_itself(in_root, many_runs: Path, tmp_path: Path) -> None:
    directory = tmp_path / "runs"
    directory.mkdir()
    paths = sorted(many_runs.glob("*.json"))
    for p in paths:
        (directory / p.name).write_bytes(p.read_bytes())
    bad = directory / paths[137].name
    bad.write_text('{"format": "fuseci-run", "format_version": 1}')
    result = invoke("history", directory)
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith(f"fuseci: error: {bad}") and len(result.stderr.splitlines()) == 1


@pytest.mark.filterwarnings("error::RuntimeWarning")  # no overflow warning reaches the user either
def test_extreme_but_finite_gains_are_followed_and_drawn(in_root, runs_dir: Path, tmp_path: Path) -> None:
    # A fused kernel of 1.5e308 ns and one of 1e-300 ns: gains at either end of float range.
    directory = tmp_path / "runs"
    directory.mkdir()
    for i, path in enumerate(sorted(runs_dir.glob("*.json"))):
        doc = json.loads(path.read_text())
        for k in doc["suites"]["elementwise"]["kernels"]:
            if k["variant"] == "fused" and i >= 2:
                k["gpu__time_duration.sum"] = 1.5e308 if i % 2 else 1e-300
        (directory / path.name).write_text(json.dumps(doc))
    out = tmp_path / "history.html"
    result = invoke("history", directory, "--html", out)
    assert result.exit_code == 0, result.output
    assert "inf%" not in result.stdout and "nan" not in result.stdout.lower()
    assert "×1e+" in result.stdout or "×1e-" in result.stdout  # a step beyond float range, in decades
    root, _ = parse(out.read_text())
    duration = [f for f in root.find_all("figure", cls="chart") if "duration gain" in f.all_text()]
    assert len(duration) == 5 and all(f.find_all("svg")[0].find_all("path") for f in duration)
    # Where most runs sit near the recorded gain, the runs a million-fold away are at the edge, said so.
    assert sum("beyond this axis" in f.all_text() for f in duration) >= 4


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("runs", [1, 5])
def test_gains_near_the_top_of_float_range_in_most_runs_are_drawn(
    in_root, runs_dir: Path, tmp_path: Path, runs: int
) -> None:
    """An unfused kernel of 1.5e308 ns over a fused one of 1 ns: a gain of 1.5e308 in every run,
    so the axis is set around it (a single run's history, say)."""
    directory = tmp_path / "runs"
    directory.mkdir()
    for path in sorted(runs_dir.glob("*.json"))[:runs]:
        doc = json.loads(path.read_text())
        kernels = [k for k in doc["suites"]["elementwise"]["kernels"] if k["case"] == "scale_relu_add"]
        for k in kernels:
            k["gpu__time_duration.sum"] = 1.0 if k["variant"] == "fused" else 1.5e308 / 3
        (directory / path.name).write_text(json.dumps(doc))
    out = tmp_path / "history.html"
    result = invoke("history", directory, "--html", out)
    assert result.exit_code == 0, result.output
    root, _ = parse(out.read_text())
    (chart,) = [f for f in root.find_all("figure", cls="chart") if "scale_relu_add: duration gain" in f.all_text()]
    assert chart.find_all("svg")[0].find_all("path")


def test_a_history_of_hundreds_of_gains_over_thousands_of_runs_is_one_bounded_page() -> None:
    runs = tuple(
        history.RunPoint(f"runs/{i}.json", START + timedelta(hours=i), f"{i:07x}" + "0" * 33) for i in range(2000)
    )
    rng = np.random.default_rng(3)
    series = []
    for n in range(300):
        values = tuple(float(v) for v in 2.3 * np.exp(rng.normal(0, 0.002, 2000)))
        key = ("NVIDIA H200", "s", f"case_{n // 4}", "fused", history.SHOWN[n % 4])
        series.append(history.series_of(key, list(zip(runs, values, strict=True)), 0.03, "±3%"))
    found = history.History(runs=runs, series=tuple(series))
    text = history_reporter.render_html(found, "runs")
    assert len(text.encode()) <= 3_000_000
    root, ids = parse(text)
    assert len(ids) == len(set(ids))
    drawn = root.find_all("figure", cls="chart")
    assert 0 < len(drawn) < 300
    assert f"and {300 - len(drawn)} more gains not drawn" in text
    rows = root.find_all("section", id="runs")[0].find_all("tr")
    assert len(rows) - 1 < 2000 and "more earlier runs" in text
