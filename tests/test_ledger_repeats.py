"""A ledger's ``repeats: once`` without a GPU: the launch ranges' names, the record's repeats
read as hostile input, the copies put back in launch order, and a recorded run (two pre-norm
blocks, compiled as one graph and block by block, H200) whose left-out launches come back."""

from __future__ import annotations

import html as markup
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fuseci.cli import app
from fuseci.config import names
from fuseci.errors import ReportError
from fuseci.frames import repeats as repeated
from fuseci.frames import report
from fuseci.records.harness import HarnessRecord

DATA = Path(__file__).resolve().parent / "data"
REPORT = DATA / "reports" / "stack_repeats.ncu-rep.xz"
SUITE = DATA / "suites" / "stack_repeats.yaml"


def test_launch_ranges_round_trip_and_others_are_not_ours() -> None:
    assert names.parse_launch_range(names.launch_range(3, 41)) == (3, 41)
    assert names.parse_launch_range(names.launch_range(3, 41, repeat=True)) is None
    for other in ("fuseci-launch:1", "fuseci-launch:a:2", "fuseci-launch:-1:2", "fuseci:s:c:v", "x, op_id = 3"):
        assert names.parse_launch_range(other) is None
    assert names.repeat_filter() == "regex:^fuseci-repeat:.*/"
    stack = ["fuseci:s:c:v", names.launch_range(2, 7, repeat=True), names.launch_range(2, 9), "k, op_id = 4"]
    assert names.find_launch_range(stack) == (2, 2, 9)
    assert names.find_launch_range(stack[:2]) is None


@pytest.mark.parametrize(
    ("raw", "place"),
    [
        ([[2, 1, 1]], "repeats: expected an object"),
        ({"first": [[2, 1, 1]]}, "repeats.first: not a valid key"),
        ({"0": "2,1,1"}, 'repeats["0"]: expected a list'),
        ({"0": [[2, 1]]}, 'repeats["0"][0]'),
        ({"0": [[1, 1, 0]]}, 'repeats["0"]: [0] is [1, 1, 0], not'),
        ({"0": [[1, 2, 0]]}, 'repeats["0"]: [0] is [1, 2, 0], not'),
        ({"0": [[2, 0, True]]}, 'repeats["0"][0][2]'),
        ({"0": [[2, 0, 1], [2, 1, 1]]}, 'repeats["0"]: [1] is'),
        ({"0": [[2, 0, 1], [3, 2, 1]]}, "names a launch that repeats another"),
        ({"0": [[2**40, 0, 1]]}, 'repeats["0"][0][0]'),
    ],
)
def test_a_record_s_repeats_are_hostile_until_checked(raw: object, place: str) -> None:
    """Checked once, where the record is read."""
    case = {"status": "ok", "message": "", "measured": ["v"], "checks": []}
    record = {"format": "fuseci-harness-record", "format_version": 2, "suite": "s", "complete": True}
    provenance = {"v": {"artifacts": [], "repeats": raw}}
    with pytest.raises(ReportError) as err:
        HarnessRecord.from_json({**record, "cases": {"c": {**case, "provenance": provenance}}}, "run.harness.json")
    message = str(err.value)
    assert message.startswith("run.harness.json: cases.c.provenance.v.") and place in message, message
    assert "\n" not in message


def _k(name: str, *stack: str) -> repeated.Kernel:
    return repeated.Kernel({"kernel": name}, tuple(stack))


def test_copies_take_their_launch_s_place_and_range() -> None:
    """Launches 0 and 2 profiled, 1 and 3 repeat 0 (3 in another graph run), an unmarked kernel
    after launch 2: each copy lands after the launches before it, its range renamed."""
    region = "Torch-Compiled Region: 0/0, op_id = 1"
    kernels = [
        _k("a", region, names.launch_range(1, 0), "a, op_id = 5"),
        _k("b", region, names.launch_range(1, 2), "b, op_id = 7"),
        _k("copy_kernel", region, "aten::copy_, op_id = 8"),
    ]
    out = repeated.expand(kernels, {1: (0, 1), 3: (0, 2)})
    assert [k.row["kernel"] for k in out] == ["a", "a", "b", "copy_kernel", "a"]
    assert [k.repeat for k in out] == [False, True, False, False, True]
    assert out[1].stack == (region, names.launch_range(1, 1), "a, op_id = 5")
    assert out[4].stack[1] == names.launch_range(2, 3)
    assert out[1].row is not kernels[0].row
    assert repeated.expand(kernels, {5: (4, 1)}) == kernels  # launch 4 launched no kernel: nothing to copy


def _ledgers(doc: dict) -> dict[str, dict]:
    variants = doc["suites"][0]["cases"][0]["variants"]
    return {v["variant"]: v for v in variants if v.get("ledger")}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("repeats")
    out = tmp / "r.json"
    result = CliRunner().invoke(
        app, ["run", str(SUITE), "--from-report", str(REPORT), "--baselines", str(tmp / "b"), "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())


def test_a_recorded_forward_counts_every_launch_of_one_graph(recorded: dict) -> None:
    record = json.loads(REPORT.with_name("stack_repeats.harness.json").read_text())
    left_out = record["cases"]["stack"]["provenance"]["graph"]["repeats"]["0"]
    ledger = _ledgers(recorded)["graph"]
    rows = ledger["ledger"]["rows"]
    assert not [r for r in rows if r["kind"] == "untraced"]
    assert sum(r["measured"]["launches"] for r in rows) == ledger["values"]["launches"] == 17
    copied = [r for r in rows if "not profiled again" in r["note"]]
    assert len(copied) == len(left_out) == 6
    frame = report.read_report(REPORT)  # what ncu profiled, nothing counted back in
    assert int((frame[names.VARIANT] == "graph").sum()) == 17 - 6
    # a copy carries the measurement of the first launch of its configuration
    addmm = [r["measured"] for r in rows if r["kernel"] == "extern_kernels.addmm"]
    assert addmm[0] == addmm[4] and addmm[1] == addmm[5]
    # each row keeps the launch shapes it ran with: the choice its autotuner or library made
    for r in rows:
        assert r["measured"]["shapes"], r
        assert all(x.split("x")[0].isdigit() and x.split("x")[1].isdigit() for x in r["measured"]["shapes"])


def test_a_graph_run_once_per_block_keeps_each_run_apart(recorded: dict) -> None:
    """Compiled block by block, one graph runs twice: its second run was not profiled at all,
    yet every call holds two launches and none is left untraced."""
    rows = _ledgers(recorded)["blocks"]["ledger"]["rows"]
    assert rows and not [r for r in rows if r["kind"] == "untraced"]
    assert all(r["measured"]["launches"] == 2 for r in rows), [(r["kernel"], r["measured"]) for r in rows]
    assert all("1 of its 2 kernel launches" in r["note"] for r in rows)


def test_a_tampered_record_is_exit_3_naming_the_place(tmp_path: Path) -> None:
    rep = tmp_path / REPORT.name
    shutil.copy(REPORT, rep)
    record = json.loads(REPORT.with_name("stack_repeats.harness.json").read_text())
    record["cases"]["stack"]["provenance"]["graph"]["repeats"]["0"][0] = [9, 12, 1]
    rep.with_name("stack_repeats.harness.json").write_text(json.dumps(record))
    result = CliRunner().invoke(app, ["run", str(SUITE), "--from-report", str(rep), "--baselines", str(tmp_path / "b")])
    assert result.exit_code == 3, result.output
    assert 'cases.stack.provenance.graph.repeats["0"]: [0] is [9, 12, 1]' in " ".join(result.output.split())


def test_the_terminal_and_the_html_report_say_what_was_counted_back(tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(SUITE),
            "--from-report",
            str(REPORT),
            "--baselines",
            str(tmp_path / "b"),
            "--html",
            str(page),
            "-v",
        ],
    )
    assert result.exit_code == 0, result.output
    said = "6 of the forward's 17 kernel launches repeat an earlier launch's configuration and were not profiled again"
    assert said in result.output
    assert "9 of the forward's 18 kernel launches" in result.output
    html = markup.unescape(page.read_text())
    assert said in html and "1 of its 2 kernel launches counted with the measurement" in html


def test_each_ledger_is_built_once_by_update_baselines_and_by_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """update-baselines judges the run against the old ledgers and records the new ones; a run
    judges them: each ledger variant's ledger is built once for all of it, and the run's judged
    ledgers carry the changes since the recorded ones to the report."""
    from fuseci.ledger import build

    built: list[int] = []
    real = build.build
    monkeypatch.setattr(build, "build", lambda *a: built.append(1) or real(*a))
    baselines = str(tmp_path / "b")
    given = ["--from-report", str(REPORT), "--baselines", baselines]
    result = CliRunner().invoke(app, ["update-baselines", str(SUITE), *given])
    assert result.exit_code == 0, result.output
    assert len(built) == 2  # graph and blocks
    assert list((tmp_path / "b").rglob("stack_repeats.ledgers.json"))
    built.clear()
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["run", str(SUITE), *given, "--json", str(out), "-v"])
    assert result.exit_code == 0, result.output
    assert len(built) == 2
    assert "since the baseline's ledger:" in result.output and "no node of the model changed company" in result.output
