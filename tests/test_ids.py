"""Ids and command-line operands: an id is the whole string, an id or a path that starts with
``-`` is never taken for an option, and ``--shard`` is bounded and fast."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import MINIMAL_SUITE, SUITES, write
from hypothesis import given, settings
from hypothesis import strategies as st

from fuseci import api, validation
from fuseci.config import names
from fuseci.config.model import Suite
from fuseci.config.parse import load_suite
from fuseci.errors import SuiteError, UsageError
from fuseci.harness.__main__ import main as harness_main
from fuseci.measure import profile as ncu
from fuseci.measure.command import Mode, SuiteFiles, harness_argv, operand


@pytest.mark.parametrize("text", ["elementwise\n", "elementwise\r\n", "a\nb", "\nelementwise", "", "a b", "a/b", "a:b"])
def test_an_id_is_the_whole_string(text: str) -> None:
    assert not names.is_id(text)
    assert names.parse_range(f"fuseci:{text}:c:v") is None
    assert names.parse_range(f"fuseci:s:c:{text}") is None


def test_a_suite_id_with_a_trailing_newline_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "s.yaml", MINIMAL_SUITE.replace("suite: demo", 'suite: "demo\\n"'))
    with pytest.raises(SuiteError, match="is not a valid id"):
        load_suite(path)
    path = write(tmp_path / "c.yaml", MINIMAL_SUITE.replace("id: c1", 'id: "c1\\n"'))
    with pytest.raises(SuiteError, match="is not a valid id"):
        load_suite(path)


# --- one length limit, and ids compared ignoring letter case ---------------------------------


def test_one_id_length_limit_for_the_loader_and_the_readers(tmp_path: Path) -> None:
    from pydantic import TypeAdapter, ValidationError

    from fuseci.judge import verdict

    longest, longer = "i" * validation.MAX_ID_CHARS, "i" * (validation.MAX_ID_CHARS + 1)
    assert names.is_id(longest) and not names.is_id(longer)
    for reader in (validation.Id, verdict.CaseId):  # baselines, run and record files; results files
        TypeAdapter(reader).validate_python(longest)
        with pytest.raises(ValidationError):
            TypeAdapter(reader).validate_python(longer)
    assert (
        load_suite(write(tmp_path / "ok.yaml", MINIMAL_SUITE.replace("suite: demo", f"suite: {longest}"))).name
        == longest
    )
    for old, new, length in (
        ("suite: demo", f"suite: {'s' * 1000}", 1000),
        ("id: c1", f"id: {longer}", 201),
        ("      fused:", f"      {longer}:", 201),
    ):
        with pytest.raises(SuiteError, match=f"is {length} characters long; an id has at most 200"):
            load_suite(write(tmp_path / "long.yaml", MINIMAL_SUITE.replace(old, new)))


def test_ids_that_differ_only_in_case_are_refused_within_a_suite(tmp_path: Path) -> None:
    cases = MINIMAL_SUITE + MINIMAL_SUITE.split("cases:\n")[1].replace("id: c1", "id: C1")
    with pytest.raises(
        SuiteError, match=r":9: case 'C1': case id 'C1' differs from 'c1' \(line 3\) only in letter case"
    ):
        load_suite(write(tmp_path / "cases.yaml", cases))
    variants = MINIMAL_SUITE + "      Fused: kernels.elementwise:scale_relu_add_fused\n"
    with pytest.raises(
        SuiteError, match=r":9: case 'c1'.variants.Fused: variant id 'Fused' differs from 'fused' \(line 8\)"
    ):
        load_suite(write(tmp_path / "variants.yaml", variants))


def test_suite_ids_that_differ_only_in_case_are_refused_across_files(tmp_path: Path) -> None:
    a = write(tmp_path / "suites" / "a.yaml", MINIMAL_SUITE.replace("suite: demo", "suite: Demo"))
    b = write(tmp_path / "suites" / "b.yaml", MINIMAL_SUITE)
    c = write(tmp_path / "suites" / "c.yaml", MINIMAL_SUITE.replace("suite: demo", "suite: other"))
    check = api.check_suites([a, b, c], resolve=False)
    assert [(p.path, p.line) for p in check.problems] == [(a, 1), (b, 1)]
    assert f"suite id 'Demo' differs only in letter case (also {b}:1)" in check.problems[0].message
    assert "share one baseline file" in check.problems[0].message


@pytest.mark.parametrize("path", ["-x.yaml", "--help", "-", "a/-b.yaml"])
def test_operands_are_never_options(path: str) -> None:
    text = operand(Path(path))
    assert not text.startswith("-") and Path(text) == Path(path)


def test_the_harness_takes_paths_and_case_ids_that_start_with_a_dash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    files = SuiteFiles(Path("-out"), "s").harness(Mode.TIME)
    argv = harness_argv(Mode.TIME, files.record, Path("-x.yaml"), cases=["-c", "--help"], python="py")
    assert argv[:4] == ["py", "-m", "fuseci.harness", "./-x.yaml"]
    assert argv[4:6] == ["--record", "./-out/s.timing.json"]
    assert argv[-2:] == ["--case=-c", "--case=--help"]
    # Parsing succeeds; the missing suite file is what stops it (not an argparse error, exit 2).
    assert harness_main(argv[3:]) == 3
    assert "-x.yaml: suite file not found" in capsys.readouterr().err


def test_ncu_gets_operands_for_its_files() -> None:
    argv = ncu.build_command(
        "ncu", Path("-s.yaml"), load_suite(SUITES / "elementwise.yaml").ncu, SuiteFiles(Path("-o"), "s")
    )
    assert argv[argv.index("--export") + 1] == "./-o/s.ncu-rep"
    assert argv[argv.index("--log-file") + 1] == "./-o/s.ncu.log"
    assert "./-s.yaml" in argv


# --- --shard --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["1/99999999999999999999", "1/10001", "99999999999999999999/99999999999999999999", "1/1e3", "+1/2", "1/ 2"]
)
def test_shard_count_is_bounded(text: str) -> None:
    with pytest.raises(UsageError, match="--shard"):
        api.parse_shard(text)


def test_the_largest_shard_count_costs_no_more_than_one_shard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dealing suites to 10,000 shards does the work of dealing them to as many shards as there
    are suites: one heap pop and push per suite, on a heap never larger than the suite count
    (counted, not timed)."""
    import heapq

    from fuseci.api import sharding

    suites = [load_suite(p) for p in sorted(SUITES.glob("*.yaml"))]
    assert api.parse_shard(f"{api.MAX_SHARDS}/{api.MAX_SHARDS}") == (api.MAX_SHARDS, api.MAX_SHARDS)
    pops: list[int] = []
    real_pop = heapq.heappop

    def counted_pop(heap):  # type: ignore[no-untyped-def]
        pops.append(len(heap))
        return real_pop(heap)

    monkeypatch.setattr(sharding.heapq, "heappop", counted_pop)
    dealt = [api.shard(suites, k, api.MAX_SHARDS) for k in (1, 2, api.MAX_SHARDS)]
    assert len(pops) == 3 * len(suites) and max(pops) <= len(suites)
    assert dealt[2] == [] and dealt[0] and dealt[1]  # the last shard of 10,000 gets nothing to do


def _dealt(sizes: list[int], n: int) -> list[int]:
    """Which shard each suite goes to, the way sharding has always dealt them (one pass over
    every shard per suite): the reference the faster dealing must agree with."""
    loads = [0] * n
    owner = [0] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        lightest = min(range(n), key=lambda s: (loads[s], s))
        owner[i] = lightest
        loads[lightest] += sizes[i]
    return owner


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(st.integers(1, 20), max_size=12), st.integers(1, 30))
def test_sharding_deals_as_it_always_did(sizes: list[int], n: int) -> None:
    base = load_suite(SUITES / "elementwise.yaml")
    suites = [
        Suite(name=f"s{i:02d}", path=base.path, description="", cases=base.cases[:1] * size)
        for i, size in enumerate(sizes)
    ]
    expected = _dealt(sizes, n)
    for k in range(1, n + 1):
        assert [s.name for s in api.shard(suites, k, n)] == [f"s{i:02d}" for i, o in enumerate(expected) if o == k - 1]
