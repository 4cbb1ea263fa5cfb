"""Scale-out: deterministic shards of the suite set, and merging JSON results back together."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import CLEAN_REPORT, REGRESSED_REPORT, SUITES

from fuseci import api
from fuseci.config.parse import load_suite
from fuseci.errors import ReportError, UsageError
from fuseci.judge.verdict import CaseResult, CheckKind, Comparison, MetricDelta, Verdict
from fuseci.reporters import json as json_reporter
from fuseci.store import results
from fuseci.store.results import read_results

ALL = [load_suite(p) for p in sorted(SUITES.glob("*.yaml"))]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7])
def test_shards_partition_the_suites(n: int) -> None:
    shards = [api.shard(ALL, k, n) for k in range(1, n + 1)]
    names = [s.name for part in shards for s in part]
    assert sorted(names) == sorted(s.name for s in ALL)  # every suite exactly once
    assert all(part for part in shards[: min(n, len(ALL))])  # no shard idles while another has two


def test_shards_do_not_depend_on_order_and_balance_cases() -> None:
    for k in (1, 2):
        assert {s.name for s in api.shard(ALL, k, 2)} == {s.name for s in api.shard(list(reversed(ALL)), k, 2)}
    loads = [sum(len(s.cases) for s in api.shard(ALL, k, 2)) for k in (1, 2)]
    assert max(loads) - min(loads) <= max(len(s.cases) for s in ALL)


@pytest.mark.parametrize("text", ["0/2", "3/2", "2", "a/b", "1/0", ""])
def test_bad_shard(text: str) -> None:
    with pytest.raises(UsageError, match="--shard"):
        api.parse_shard(text)


def test_results_round_trip(in_root, tmp_path: Path) -> None:
    suite = load_suite("suites/elementwise.yaml")
    comps = [api.check(suite, api.RunOptions(from_report=r)) for r in (CLEAN_REPORT, REGRESSED_REPORT)]
    path = tmp_path / "r.json"
    path.write_text(json_reporter.render(comps))
    again = read_results(path)
    assert json_reporter.render(again) == path.read_text()  # every number survives


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{", "not JSON"),
        ("[]", "not a fuseci results file"),
        ('{"format_version": 99, "suites": []}', "newer"),
        ('{"format_version": 1, "suites": [{"suite": "x"}]}', "suites[0]: missing required key 'suite_path'"),
    ],
)
def test_bad_results_file(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(ReportError, match=re.escape(fragment)):
        read_results(path)


def test_a_results_file_of_more_suites_than_fuseci_reads_is_not_written() -> None:
    """A merge of many results may hold more suites than a results file may: it would be lost to
    the next merge."""
    from fuseci.judge.verdict import failed
    from fuseci.store import results

    suite = load_suite(SUITES / "elementwise.yaml")
    many = [failed(suite, "not run")] * (results.MAX_SUITES + 1)
    with pytest.raises(ReportError, match=re.escape(f"a results file of {results.MAX_SUITES + 1:,} suites is more")):
        json_reporter.render(many)
    assert json_reporter.render(many[:2]).startswith("{")


def test_a_checks_band_passes_and_why_not_gated_are_fields_written_where_they_say_something(tmp_path: Path) -> None:
    """What tools would otherwise read out of a message: the band a change was judged within, the
    timed passes behind a median, why a quantity is shown, not gated; absent where none."""
    said = MetricDelta("c", "fused", CheckKind.GAIN, "event_time", Verdict.PASS, "m", band=0.186, timed_passes=3)
    shown = MetricDelta("c", "fused", CheckKind.VALUE, "smsp__inst_executed.sum", Verdict.PASS, "m", not_gated="why")
    plain = MetricDelta("c", "fused", CheckKind.GAIN, "dram__bytes.sum", Verdict.PASS, "m", current=2, change=0.5)
    case = CaseResult("c", 1, "d", (said, shown, plain), ())
    comparison = Comparison("s", "s.yaml", {}, None, False, (), (case,))
    path = tmp_path / "r.json"
    path.write_text(results.dumps([comparison]))
    checks = json.loads(path.read_text())["suites"][0]["cases"][0]["checks"]
    assert checks[0]["band"] == 0.186 and checks[0]["timed_passes"] == 3 and "not_gated" not in checks[0]
    assert checks[1]["not_gated"] == "why" and not {"band", "timed_passes"} & checks[1].keys()
    assert not {"band", "timed_passes", "not_gated", "retry"} & checks[2].keys() and checks[2]["current"] == 2
    (back,) = read_results(path)
    assert back.cases[0].checks == (said, shown, plain)
    assert results.dumps([back]) == path.read_text()
