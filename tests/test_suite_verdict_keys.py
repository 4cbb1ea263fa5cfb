"""The suite keys behind the newer checks: timing and occupancy gates, the bytes allowance and
minimum, candidates judged against another variant's baseline, planted regressions, and the
fusion ledger of a compiled forward (``ledger:``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import MINIMAL_SUITE, variant_of, write

from fuseci.config import names
from fuseci.config.model import LedgerSpec
from fuseci.config.parse import check_suite, load_suite
from fuseci.errors import SuiteError

FUSED = "      fused: kernels.elementwise:scale_relu_add_fused\n"


def _load(tmp_path: Path, text: str):
    return load_suite(write(tmp_path / "s.yaml", text))


def _error(tmp_path: Path, text: str) -> str:
    with pytest.raises(SuiteError) as info:
        _load(tmp_path, text)
    return str(info.value)


def test_defaults_gate_the_speedup_and_host_blocking_not_occupancy_and_allow_ten_percent(tmp_path: Path) -> None:
    suite = _load(tmp_path, MINIMAL_SUITE)
    (case,) = suite.cases
    assert str(case.gates[names.EVENT_TIME]) == "±10%"
    assert str(case.gates[names.HOST_BLOCKING]) == "exact"
    assert str(case.gates[names.DRAM_BYTES]) == "±1%" and str(case.gates[names.DURATION]) == "±10%"
    assert names.OCC_THEORETICAL not in case.gates and names.OCC_ACHIEVED not in case.gates  # a cause, not a gate
    assert case.bytes_allowance.relative == pytest.approx(0.10) and case.min_bytes is None
    assert suite.timed and not suite.planted


def test_the_speedup_gate_off_means_no_timed_pass(tmp_path: Path) -> None:
    suite = _load(tmp_path, MINIMAL_SUITE + "defaults: {gates: {event_time: 'off'}}\n")
    assert not suite.timed


def test_allowance_and_minimum_per_case_and_by_default(tmp_path: Path) -> None:
    text = MINIMAL_SUITE.replace("    inputs:", "    min_bytes: 4096\n    bytes_allowance: 2%\n    inputs:")
    (case,) = _load(tmp_path, text + "defaults: {bytes_allowance: 'off'}\n").cases
    assert case.min_bytes == 4096 and case.bytes_allowance.relative == pytest.approx(0.02)
    (case,) = _load(tmp_path, MINIMAL_SUITE + "defaults: {bytes_allowance: 'off'}\n").cases
    assert not case.bytes_allowance.enabled
    assert "bytes_allowance" in _error(tmp_path, MINIMAL_SUITE + "defaults: {bytes_allowance: lots}\n")
    assert "min_bytes: expected a non-negative integer" in _error(
        tmp_path, MINIMAL_SUITE.replace("    inputs:", "    min_bytes: -1\n    inputs:")
    )


def test_occupancy_is_gated_but_cannot_be_expected_as_a_gain(tmp_path: Path) -> None:
    ok = MINIMAL_SUITE + "defaults: {gates: {sm__warps_active.avg.pct_of_peak_sustained_active: 10%}}\n"
    (case,) = _load(tmp_path, ok).cases
    assert case.gates[names.OCC_ACHIEVED].relative == pytest.approx(0.10)
    bad = MINIMAL_SUITE + "defaults: {expect: {sm__maximum_warps_per_active_cycle_pct: '>= 1x'}}\n"
    assert "no gain named 'sm__maximum_warps_per_active_cycle_pct'" in _error(tmp_path, bad)


def _with_candidate(spec: str) -> str:
    return MINIMAL_SUITE.replace(FUSED, FUSED + f"      v2: {spec}\n")


def test_a_candidate_is_judged_against_another_variants_baseline(tmp_path: Path) -> None:
    (case,) = _load(tmp_path, _with_candidate("{fn: 'kernels.mutants:scale_relu_add_rereads', baseline: fused}")).cases
    v2 = variant_of(case, "v2")
    assert v2.candidate_for == "fused" and v2.judged_as == "fused" and variant_of(case, "fused").judged_as == "fused"


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("{fn: 'm:f', baseline: nope}", "'nope' is not a variant of this case"),
        ("{fn: 'm:f', baseline: v2}", "expected the id of another fused variant"),
        ("{fn: 'm:f', baseline: unfused}", "expected the id of another fused variant"),
        ("{fn: 'm:f', caught_by: [bytez]}", "no check named 'bytez'; did you mean 'bytes'?"),
        ("{fn: 'm:f', caught_by: []}", "expected a check name or a list of them"),
    ],
)
def test_bad_candidate_or_planted_keys_say_what_to_write(tmp_path: Path, spec: str, says: str) -> None:
    message = _error(tmp_path, _with_candidate(spec))
    assert says in message and "case 'c1'.variants.v2" in message


def test_no_chains_of_baselines(tmp_path: Path) -> None:
    text = _with_candidate("{fn: 'm:f', baseline: fused}").replace(
        FUSED, FUSED + "      v3: {fn: 'm:f', baseline: v2}\n"
    )
    assert "'v2' is itself judged against another's baseline" in _error(tmp_path, text)


def test_planted_suite_and_caught_by(tmp_path: Path) -> None:
    text = "planted: true\n" + _with_candidate("{fn: 'm:f', baseline: fused, caught_by: bytes}")
    suite = _load(tmp_path, text)
    assert suite.planted and variant_of(suite.cases[0], "v2").caught_by == ("bytes",)
    assert "planted: expected true or false" in _error(tmp_path, "planted: yes please\n" + MINIMAL_SUITE)
    unfused = MINIMAL_SUITE.replace(
        "      unfused: kernels.elementwise:scale_relu_add_unfused\n",
        "      unfused: {fn: 'kernels.elementwise:scale_relu_add_unfused', caught_by: [bytes]}\n",
    )
    assert "takes no baseline or caught_by" in _error(tmp_path, unfused)


def test_a_planted_suite_without_a_planted_variant_is_refused(tmp_path: Path) -> None:
    """``planted: true`` takes a suite out of the default run: without a variant that has
    ``caught_by`` it plants nothing, and would only leave the gate (``fuseci check`` and every
    command that loads it refuse it)."""
    message = _error(tmp_path, "planted: true\n" + MINIMAL_SUITE)
    assert ":1: planted:" in message and "no variant has caught_by" in message
    assert "remove planted: true" in message
    from fuseci.config.check import check_files

    (tmp_path / "s.yaml").write_text("planted: true\n" + MINIMAL_SUITE)
    (checked,) = check_files([tmp_path / "s.yaml"], resolve=False).files
    assert checked.suite is None and any("no variant has caught_by" in p.message for p in checked.problems)


# --- the fusion ledger ------------------------------------------------------------------------

TORCH = "defaults: {framework: torch}\n"
COMPILED = "      compiled: {fn: 'm:f'%s}\n"


def _ledger_suite(compiled: str = "", planted: str = "", head: str = TORCH) -> str:
    """MINIMAL_SUITE with a variant ``compiled`` (``compiled`` is the rest of its mapping) and,
    when given, a variant ``planted`` (its whole mapping), with ``head`` above."""
    extra = COMPILED % compiled + (f"      planted: {planted}\n" if planted else "")
    return head + MINIMAL_SUITE.replace(FUSED, FUSED + extra)


def _problems(tmp_path: Path, text: str) -> list[str]:
    read = check_suite(write(tmp_path / "s.yaml", text))
    assert read.suite is None
    return [str(p) for p in read.problems]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (", ledger: true", LedgerSpec()),
        (", ledger: {}", LedgerSpec()),
        (", ledger: {allow_new: ['triton_poi_fused_clone_.*', 'x'], graphs: 1}",
         LedgerSpec(("triton_poi_fused_clone_.*", "x"), 1)),
        (", ledger: {allow_new: 'triton_.*'}", LedgerSpec(("triton_.*",), None)),
        (", ledger: {graphs: 2}", LedgerSpec((), 2)),
        (", ledger: false", None),
        ("", None),
    ],
)  # fmt: skip
def test_a_ledger_is_true_or_a_mapping(tmp_path: Path, spec: str, expected: LedgerSpec | None) -> None:
    (case,) = _load(tmp_path, _ledger_suite(spec)).cases
    assert variant_of(case, "compiled").ledger == expected
    assert variant_of(case, "fused").ledger is None and variant_of(case, "unfused").ledger is None


def test_a_bad_allow_new_pattern_names_its_place_the_pattern_and_the_error(tmp_path: Path) -> None:
    (problem,) = _problems(tmp_path, _ledger_suite(", ledger: {allow_new: ['triton_.*', 'triton_(']}"))
    assert ":10: case 'c1'.variants.compiled.ledger.allow_new[1]: 'triton_(' is not a regular expression" in problem
    assert "missing ), unterminated subpattern at position 7" in problem


@pytest.mark.parametrize("graphs", ["0", "-1", "'x'", "1.5", "true", "null"])
def test_graphs_is_a_positive_whole_number(tmp_path: Path, graphs: str) -> None:
    (problem,) = _problems(tmp_path, _ledger_suite(f", ledger: {{graphs: {graphs}}}"))
    assert ":10: case 'c1'.variants.compiled.ledger.graphs: expected a positive whole number" in problem
    assert "(1: no graph break allowed)" in problem


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        (", ledger: 'yes'", "expected true or a mapping {allow_new: [...], graphs: N}, got string 'yes'"),
        (", ledger: ", "got null (YAML reads an empty value as null): write `ledger: true`"),
        (", ledger: [a]", "expected true or a mapping"),
        (", ledger: {allow_new: [3]}", "allow_new[0]: expected a regular expression of a kernel name, got 3"),
        (", ledger: {allow_new: ['']}", "expected a regular expression of a kernel name, got ''"),
    ],
)
def test_a_ledger_that_cannot_be_read_says_what_to_write(tmp_path: Path, spec: str, says: str) -> None:
    (problem,) = _problems(tmp_path, _ledger_suite(spec))
    assert ":10: case 'c1'.variants.compiled.ledger" in problem and says in problem


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        (", ledgr: true", "variants.compiled: unknown key 'ledgr'; did you mean 'ledger'?"),
        (", ledger: {alow_new: [x]}", "variants.compiled.ledger: unknown key 'alow_new'; did you mean 'allow_new'? "
         "allowed keys: allow_new, graphs"),
        (", ledger: {graph: 1}", "unknown key 'graph'; did you mean 'graphs'?"),
    ],
)  # fmt: skip
def test_a_misspelt_ledger_key_says_which_was_meant(tmp_path: Path, spec: str, says: str) -> None:
    (problem,) = _problems(tmp_path, _ledger_suite(spec))
    assert ":10: case 'c1'." in problem and says in problem


def test_only_a_variant_taking_torch_tensors_has_a_ledger(tmp_path: Path) -> None:
    (problem,) = _problems(tmp_path, _ledger_suite(", ledger: true", head=""))
    assert ":9: case 'c1'.variants.compiled.ledger: audits a torch.compile'd forward" in problem
    assert "variant 'compiled' takes cupy arrays; set `framework: torch`" in problem
    (case,) = _load(tmp_path, _ledger_suite(", ledger: true, framework: torch", head="")).cases
    assert variant_of(case, "compiled").ledger == LedgerSpec() and variant_of(case, "compiled").framework == "torch"


def test_a_planted_variant_caught_by_the_ledger_states_its_own_and_its_baselines(tmp_path: Path) -> None:
    planted = "{fn: 'm:g', baseline: compiled, caught_by: [ledger]%s}"
    (case,) = _load(tmp_path, _ledger_suite(", ledger: true", planted % ", ledger: {graphs: 1}")).cases
    assert variant_of(case, "planted").caught_by == ("ledger",) and variant_of(case, "planted").ledger == LedgerSpec(
        (), 1
    )
    (own,) = _problems(tmp_path, _ledger_suite(", ledger: {graphs: 1}", planted % ""))
    assert ":11: case 'c1'.variants.planted.caught_by: names 'ledger', but the variant has no ledger" in own
    assert "(a planted variant inherits none): add `ledger: true` to it" in own
    (theirs,) = _problems(tmp_path, _ledger_suite("", planted % ", ledger: true"))
    assert ":11: case 'c1'.variants.planted.caught_by: names 'ledger', but 'compiled'" in theirs
    assert "add `ledger: true` to 'compiled'" in theirs


def test_a_planted_variant_inherits_no_ledger(tmp_path: Path) -> None:
    (case,) = _load(
        tmp_path, _ledger_suite(", ledger: true", "{fn: 'm:g', baseline: compiled, caught_by: [bytes]}")
    ).cases
    assert variant_of(case, "compiled").ledger == LedgerSpec() and variant_of(case, "planted").ledger is None


def test_fuseci_check_reports_every_ledger_problem_at_its_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from fuseci.cli import app

    text = _ledger_suite(", ledger: {allow_new: ['(']}", head="").replace(
        FUSED, FUSED + "      eager: {fn: 'm:h', ledger: {graphs: 0}}\n"
    )
    result = CliRunner().invoke(app, ["check", str(write(tmp_path / "s.yaml", text))])
    assert result.exit_code == 3, result.output
    assert "s.yaml:9: case 'c1'.variants.eager.ledger.graphs: expected a positive whole number" in result.stderr
    assert (
        "s.yaml:10: case 'c1'.variants.compiled.ledger.allow_new[0]: '(' is not a regular expression" in result.stderr
    )
    fixed = text.replace("['(']", "['x']").replace("graphs: 0", "graphs: 1")
    result = CliRunner().invoke(app, ["check", str(write(tmp_path / "s.yaml", fixed))])
    assert result.exit_code == 3 and "variants.eager.ledger: audits a torch.compile'd forward" in result.stderr
    assert "variants.compiled.ledger: audits" in result.stderr
