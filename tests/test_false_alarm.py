"""tools/false_alarm.py: the expected false red runs of a full run, from a noise study's clean runs.

The runs are written by fuseci's own results writer, so they have the shape `fuseci run --json`
gives them.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import ROOT

from fuseci.judge.verdict import CaseResult, CheckKind, Comparison, MetricDelta, Verdict
from fuseci.store import results

spec = importlib.util.spec_from_file_location("false_alarm", ROOT / "tools" / "false_alarm.py")
assert spec is not None and spec.loader is not None
fa = importlib.util.module_from_spec(spec)
sys.modules["false_alarm"] = fa  # its dataclasses look themselves up there
spec.loader.exec_module(fa)

DRAM, DURATION, EVENT, OCC = (
    "dram__bytes.sum",
    "gpu__time_duration.sum",
    "event_time",
    "sm__maximum_warps_per_active_cycle_pct",
)


def gain(case: str, quantity: str, change: float, tolerance: str, variant: str = "fused") -> MetricDelta:
    verdict = Verdict.PASS
    tau = 0.0 if tolerance == "exact" else fa._percent(fa._base_tolerance(tolerance))
    if abs(change) > max(tau, 1e-9):
        verdict = Verdict.IMPROVED if change > 0 else Verdict.REGRESSED
    kind = CheckKind.VALUE if quantity == OCC else CheckKind.GAIN
    return MetricDelta(
        case, variant, kind, quantity, verdict, "m", current=2.0 * (1 + change), baseline_value=2.0, change=change,
        tolerance=tolerance,
    )  # fmt: skip


def write_run(path: Path, suites: dict[str, dict[str, list[MetricDelta]]]) -> Path:
    comparisons = [
        Comparison(
            suite=name,
            suite_path=f"suites/{name}.yaml",
            env={"gpu": "NVIDIA H200"},
            baseline_path=f"baselines/{name}.json",
            has_baseline=True,
            env_differences=(),
            cases=tuple(CaseResult(case, 1, "d", tuple(checks), ()) for case, checks in cases.items()),
        )
        for name, cases in suites.items()
    ]
    path.write_text(results.dumps(comparisons))
    return path


def study(tmp_path: Path, changes: list[list[float]], **extra: list[MetricDelta]) -> list[str]:
    """One run per list of changes: each change is one case's DRAM bytes gain (±1%), with an exact
    launches gain beside it; ``extra`` adds checks to case ``c0`` of every run."""
    paths = []
    for i, run in enumerate(changes):
        cases = {
            f"c{j}": [gain(f"c{j}", "launches", 0.0, "exact"), gain(f"c{j}", DRAM, x, "±1%")] for j, x in enumerate(run)
        }
        for checks in extra.values():
            cases["c0"] += checks
        paths.append(str(write_run(tmp_path / f"run-{i}.json", {"elementwise": cases})))
    return paths


def run(paths: list[str], capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = fa.main([*args, *paths])
    out, err = capsys.readouterr()
    return rc, out, err


def row(out: str, gate: str) -> list[str]:
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == gate:
            return cells
    raise AssertionError(f"no row {gate!r} in\n{out}")


# --- the math ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("p", "dof", "table"),
    [
        (0.05, 1, 0.00393214),
        (0.05, 5, 1.145476),
        (0.05, 10, 3.940299),
        (0.05, 30, 18.492661),
        (0.05, 100, 77.929465),
        (0.95, 1, 3.841459),
        (0.95, 10, 18.307038),
        (0.975, 20, 34.169607),
    ],
)
def test_chi_square_quantiles_match_the_tables(p: float, dof: int, table: float) -> None:
    assert fa.chi2_quantile(p, dof) == pytest.approx(table, rel=2e-6)
    assert fa.chi2_cdf(table, dof) == pytest.approx(p, abs=1e-6)
    if dof >= 10:  # Wilson–Hilferty, which brackets the search, is close from there on
        assert fa.chi2_quantile_wh(p, dof) == pytest.approx(table, rel=0.01)


def test_the_upper_bound_on_a_spread_is_the_chi_square_one() -> None:
    # 10 degrees of freedom: σ̂·√(10 / 3.940299) = 1.5931 σ̂; more samples, a tighter bound
    assert fa.sigma_upper(0.01, 10) == pytest.approx(0.01 * math.sqrt(10 / 3.940299), rel=1e-6)
    assert fa.sigma_upper(0.01, 100) < fa.sigma_upper(0.01, 10)
    assert fa.sigma_upper(0.0, 10) == 0.0


def test_normal_tails_one_and_two_sided() -> None:
    assert fa.normal_cdf(0.0) == 0.5
    assert fa.lower_tail(0.1, 0.02) == pytest.approx(2.866515719e-7, rel=1e-8)  # Φ(−5), from the tables
    assert fa.lower_tail(0.0196, 0.01) == pytest.approx(0.0249979, rel=1e-5)  # Φ(−1.96)
    assert fa.two_sided(0.0196, 0.01) == pytest.approx(2 * 0.0249979, rel=1e-5)


def test_re_measurement_of_a_borderline_speedup() -> None:
    tau, sigma = 0.10, 0.03
    q, r = fa.normal_cdf(-tau / sigma), fa.normal_cdf(-3 * tau / sigma)
    # independent passes: red at once below −3τ, else the first and one of the two others below −τ
    assert fa.retimed_red(tau, sigma, 0.0) == pytest.approx(r + (q - r) * (1 - (1 - q) ** 2), rel=1e-9)
    # every pass the same: re-measuring cannot help
    assert fa.retimed_red(tau, sigma, 1.0) == pytest.approx(q, rel=1e-12)
    # in between, by integration over the shared offset: monotone from one to the other
    steps = [fa.retimed_red(tau, sigma, s) for s in (0.0, 0.2, 0.5, 0.8, 0.99, 1.0)]
    assert steps == sorted(steps)
    assert steps[0] < q / 100


def test_repeats_of_one_check_count_as_one_sample_when_only_the_baseline_moves_them() -> None:
    # two checks, each 5 runs at exactly its own offset: the runs add nothing to the first
    s = fa.change_spread([[0.01] * 5, [-0.01] * 5])
    assert (s.n, s.k, s.shared) == (10, 2, 1.0)
    assert s.dof == pytest.approx(2.0)
    assert s.sigma == pytest.approx(0.01)
    # the same spread, all of it between runs: every sample counts
    s = fa.change_spread([[0.01, -0.01] * 2, [-0.01, 0.01] * 2])
    assert s.shared == 0.0 and s.dof == 8.0


# --- the runs ---------------------------------------------------------------------------------

CLEAN = [[0.0005, -0.0004, 0.0002], [-0.0003, 0.0006, -0.0001], [0.0002, -0.0005, 0.0004], [-0.0006, 0.0001, 0.0003]]


def test_a_quiet_study_meets_the_budget_and_says_how(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(study(tmp_path, CLEAN), capsys)
    assert rc == 0 and not err
    dram = row(out, DRAM)
    assert dram[1:3] == ["3", "12 (3)"]  # 3 checks per run; 12 samples of 3 checks
    assert dram[4] == "±1%"
    launches = row(out, "launches")
    assert launches[3] == "0 of 12 moved" and launches[5] == "not modelled" and launches[6] == "—"
    assert "met." in out and "NOT met" not in out
    assert "Observed: 0 red of 24 clean gated checks; 0 of 4 suite runs red." in out


def test_a_gain_fails_one_way_so_its_tail_is_one_sided(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    noisy = [[0.004, -0.003, 0.002], [-0.004, 0.003, -0.002], [0.003, -0.004, 0.004], [-0.002, 0.002, -0.003]]
    paths = study(tmp_path, noisy)
    found = fa.read(paths)
    rows = {r.gate: r for r in fa.estimate(found)}
    s = fa.change_spread([c.samples for c in found.checks.values() if c.quantity == DRAM])
    one_check = fa.lower_tail(0.01, s.upper)
    assert rows[DRAM].expected == pytest.approx(3 * one_check, rel=1e-9)
    assert rows[DRAM].expected == pytest.approx(3 * fa.two_sided(0.01, s.upper) / 2, rel=1e-9)
    # improvements and regressions of the same size give the same spread: only the tail is one-sided
    (tmp_path / "flipped").mkdir()
    flipped = fa.read(study(tmp_path / "flipped", [[-x for x in r] for r in noisy]))
    assert {r.gate: r for r in fa.estimate(flipped)}[DRAM].expected == pytest.approx(rows[DRAM].expected)


def test_a_warning_with_a_change_is_no_gated_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # an ungated occupancy drop (fuseci.judge.causes) carries a change but no tolerance
    warn = MetricDelta(
        "c0", "fused", CheckKind.VALUE, OCC, Verdict.WARN, "m", current=50.0, baseline_value=75.0, change=-1 / 3
    )
    rc, out, err = run(study(tmp_path, CLEAN, warn=[warn]), capsys)
    assert rc == 0 and not err
    assert OCC not in out


def test_planted_variants_are_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plant = [
        gain("c0", DRAM, -0.40, "±1%", variant="mutant"),
        gain("c0", "launches", -0.5, "exact", variant="mutant"),
        MetricDelta(
            "c0", "mutant", CheckKind.PLANTED, "", Verdict.PASS, "planted regression caught by dram__bytes.sum"
        ),
    ]
    rc, with_plant, _ = run(study(tmp_path, CLEAN, plant=plant), capsys)
    (tmp_path / "b").mkdir()
    rc_without, without, _ = run(study(tmp_path / "b", CLEAN), capsys)
    assert rc == rc_without == 0
    assert row(with_plant, DRAM) == row(without, DRAM)
    assert row(with_plant, "launches") == row(without, "launches")
    assert "12 checks of planted variants left out" in with_plant


def test_a_noisy_gate_breaks_the_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    noisy = [[0.004, -0.005, 0.003], [-0.006, 0.004, -0.002], [0.003, -0.004, 0.006], [-0.003, 0.002, -0.005]]
    rc, out, _ = run(study(tmp_path, noisy), capsys)
    assert rc == 1
    assert "NOT met" in out
    assert float(row(out, DRAM)[6]) > 1.0
    # a looser budget is met by the same study
    rc, out, _ = run(study(tmp_path, noisy), capsys, "--budget", "1000")
    assert rc == 0 and "NOT met" not in out


def test_an_exact_gate_that_moved_is_not_given_a_probability_but_fails_the_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    moved = [gain("c0", "launches", -0.5, "exact", variant="other")]
    rc, out, _ = run(study(tmp_path, CLEAN, moved=moved), capsys)
    assert rc == 1
    assert row(out, "launches")[3] == "4 of 16 moved"
    assert "Gates not modelled that moved or went red in clean runs: launches" in out


def test_the_speedup_gate_uses_the_re_measurement_and_the_suite_tolerance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    changes = [0.01, -0.015, 0.005, -0.01]
    paths = []
    for i, x in enumerate(changes):
        speedup = gain("c0", EVENT, x, "±12.0% (tolerance ±10%, widened by measured noise)")
        checks = [replace(speedup, band=0.12, timed_passes=3 if i == 1 else 0), gain("c0", OCC, 0.0, "±5%")]
        paths.append(str(write_run(tmp_path / f"t{i}.json", {"elementwise": {"c0": checks}})))
    rc, out, _ = run(paths, capsys)
    assert rc == 0
    event = row(out, EVENT)
    assert event[4] == "±10%"
    assert event[7].startswith("re-measured") and event[7].endswith("; 1 sample(s) a median of re-measured passes")
    found = fa.read(paths)
    s = fa.change_spread([c.samples for c in found.checks.values() if c.quantity == EVENT])
    assert {r.gate: r for r in fa.estimate(found)}[EVENT].expected == pytest.approx(
        fa.retimed_red(0.10, s.upper, s.shared), rel=1e-9
    )
    occupancy = row(out, OCC)
    assert occupancy[3] == "0 of 4 moved" and occupancy[6] == "—"


def test_checks_per_run_count_each_suite_by_its_own_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = study(tmp_path, CLEAN)  # elementwise: 4 runs of 3 DRAM checks
    for i in range(2):  # reduction: 2 runs of 2
        cases = {f"r{j}": [gain(f"r{j}", DRAM, 0.0003 * (-1) ** (i + j), "±1%")] for j in range(2)}
        paths.append(str(write_run(tmp_path / f"red-{i}.json", {"reduction": cases})))
    rc, out, _ = run(paths, capsys)
    assert rc == 0
    assert row(out, DRAM)[1:3] == ["5", "16 (5)"]


@pytest.mark.parametrize(
    ("content", "where"),
    [
        ("{not json", "not JSON"),
        ("[]", "not a fuseci results file"),
        ('{"cases": []}', "invalid results file format_version"),
        (
            '{"format_version": 1, "suites": [{"suite": "s", "suite_path": "s.yaml", "env": {}, "baseline_path": null, '
            '"has_baseline": false, "env_differences": [], "cases": [{"case": "c", "line": 1, "description": "", '
            '"checks": [7], "variants": []}]}]}',
            "suites[0].cases[0].checks[0]: expected an object",
        ),
    ],
)
def test_malformed_input_is_one_line_and_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, where: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    rc, out, err = run([str(bad)], capsys)
    assert rc == 3 and not out
    assert len(err.strip().splitlines()) == 1
    assert str(bad) in err and where in err and "fuseci run --json" in err


def test_a_wrong_field_is_named_with_its_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = Path(study(tmp_path, CLEAN[:1])[0])
    doc = json.loads(path.read_text())
    doc["suites"][0]["cases"][1]["checks"][1]["change"] = "0.1%"
    path.write_text(json.dumps(doc))
    rc, _, err = run([str(path)], capsys)
    assert rc == 3
    assert "suites[0].cases[1].checks[1].change: expected a number, got a string" in err
    doc["suites"][0]["cases"][1]["checks"][1]["change"] = True
    path.write_text(json.dumps(doc))
    assert run([str(path)], capsys)[0] == 3
    doc["suites"][0]["cases"][1]["checks"][1].update(change=0.001, tolerance="about 1%")
    path.write_text(json.dumps(doc))
    rc, _, err = run([str(path)], capsys)
    assert rc == 3 and "checks[1].tolerance: 'about 1%' is neither 'exact' nor '±X%'" in err


def test_missing_files_and_runs_without_baselines_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run([str(tmp_path / "none.json")], capsys)
    assert rc == 3 and "none.json: results file not found" in err
    empty = write_run(tmp_path / "new.json", {"elementwise": {"c0": []}})
    rc, _, err = run([str(empty)], capsys)
    assert rc == 3 and "no clean check judged against a baseline" in err
    assert run([str(empty)], capsys, "--budget", "-1")[0] == 3


def test_a_bound_is_judged_by_each_checks_margin(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # bytes over the minimum: one check near its 1.10x allowance, one far from it
    values = [(1.09, 1.02), (1.095, 1.021), (1.085, 1.019), (1.09, 1.02)]
    paths = []
    for i, (near, far) in enumerate(values):
        checks = [
            MetricDelta(
                c, "fused", CheckKind.BYTES, "dram_bytes_over_min", Verdict.PASS, "m", current=x, tolerance="<= 1.10x"
            )
            for c, x in (("c0", near), ("c1", far))
        ]
        cases = {c: [gain(c, DRAM, 0.0002 * (-1) ** i, "±1%"), k] for c, k in zip(("c0", "c1"), checks, strict=True)}
        paths.append(str(write_run(tmp_path / f"b{i}.json", {"elementwise": cases})))
    found = fa.read(paths)
    rows = {r.gate: r for r in fa.estimate(found)}
    s = fa.value_spread([c.samples for c in found.checks.values() if c.kind == "bytes"])
    assert s.dof == 6
    margins = [(1.10 - 1.09) / 1.09, (1.10 - 1.02) / 1.02]
    assert rows["bytes over the minimum"].expected == pytest.approx(sum(fa.lower_tail(m, s.upper) for m in margins))
    assert run(paths, capsys)[0] == 1  # a check 0.9% under its allowance, with 0.4% spread, fails the budget


def test_a_moving_count_is_judged_in_units_of_its_own_band_and_a_shown_count_is_no_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A library kernel's L2 requests moved between the baseline's passes: its check holds its band,
    and its changes are taken in units of that band (a rise fails). Instructions of another build
    are shown, not gated: they are no gated check, however far they moved."""
    l2, inst = "lts__t_bytes_srcunit_tex_op_read.sum", "smsp__inst_executed.sum"
    changes = [0.003, -0.002, 0.001, 0.004]
    paths = []
    for i, x in enumerate(changes):
        moving = MetricDelta(
            "c0", "fused", CheckKind.VALUE, l2, Verdict.PASS,
            f"L2 bytes requested of fused ({x:+.1%}); tolerance ±0.5% (it moved by up to 9 bytes over the "
            "profiled passes: band ±20.0%)", current=1 + x, baseline_value=1.0, change=x, tolerance="±0.5%", band=0.2,
        )  # fmt: skip
        shown = MetricDelta(
            "c0", "fused", CheckKind.VALUE, inst, Verdict.PASS,
            "instructions executed of fused is 6, baseline 5 (+20.0%); not gated: its kernels changed (k: "
            "registers 30 -> 31), and another build executes other instructions", current=6.0, baseline_value=5.0,
            change=0.2, tolerance="exact", not_gated="its kernels changed",
        )  # fmt: skip
        cases = {"c0": [gain("c0", DRAM, 0.0001 * (i - 1.5), "±1%"), moving, shown]}
        paths.append(str(write_run(tmp_path / f"run-{i}.json", {"pytorch": cases})))
    rc, out, _ = run(paths, capsys)
    banded = row(out, f"{l2} (its own band)")
    sigma = math.sqrt(sum((x / 0.2) ** 2 for x in changes) / len(changes))
    assert banded[3].startswith(f"{sigma:.3%}") and banded[4] == "band", banded
    assert "upper tail (in units of each check's band)" in banded[7]
    assert inst not in out and "Gates not modelled" not in out
    assert rc == 0, out
