"""Scale-out: deterministic shards of the suite set, and merging JSON results back together."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import CLEAN_REPORT, REGRESSED_REPORT, SUITES

from fuseci import api
from fuseci.config.parse import load_suite
from fuseci.errors import ReportError, UsageError
from fuseci.reporters import json as json_reporter
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
