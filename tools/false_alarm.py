"""The false-alarm budget of a full run: from a noise study's clean runs (tools/noise-study.sh),
how often a run with no real change would go red, against a budget of 1 in 1,000 clean runs.

    python tools/false_alarm.py [--budget 1] RUN.json [RUN.json ...]

Each RUN.json is what ``fuseci run --json`` wrote; planted variants (suites/mutants.yaml) are left
out, as in tools/noise_table.py. Prints one Markdown table, one row per gate; the model of each
gate is docs/BENCHMARKS.md's. Exits 0 when the run's union bound is within the budget, 1 when
not (or an exact gate moved), 3 for unreadable input.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist

import numpy as np

from fuseci.errors import FuseciError
from fuseci.judge.verdict import CheckKind, Verdict
from fuseci.store.results import read_results

#: Confidence of the upper bound on each spread.
CONFIDENCE = 0.95
#: A borderline CUDA-event speedup falls outside its band by at most this factor of the band
#: (fuseci.judge.checks.BORDERLINE_FACTOR) ...
BORDERLINE_FACTOR = 3.0
#: ... and is timed this many more times, each in a fresh process (fuseci.measure.run.RETIMES).
RETIMES = 2
#: The quantity of the re-measured gate.
EVENT_TIME = "event_time"
#: Check kinds whose gate fails only on a fall (higher is better; a rise is IMPROVED).
FAILS_LOW = ("gain", "value")
#: Check kinds judged against an absolute bound rather than the baseline.
BOUND_KINDS = ("bytes", "expect")
#: What the exact comparison treats as no change (fuseci.config.policy.Tolerance.classify).
EXACT_SLACK = 1e-9
#: Quantities that fail on a rise (fuseci.judge.counters): more than the baseline is REGRESSED.
FAILS_HIGH = ("l1tex__", "lts__", "smsp__inst_executed")
#: A counted check judged within its own ``band``: its change in units of that band, tolerance 1.
BANDED = "band"

USAGE_FIX = "results files are written by `fuseci run --json FILE`"


class InputError(Exception):
    """A file that is not a readable results file; the message names file, place and fix."""


def normal_cdf(x: float) -> float:
    """Φ(x), accurate far into the lower tail (erfc, not 1 − erf)."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _gamma_p(a: float, x: float) -> float:
    """The regularised lower incomplete gamma function P(a, x) (Numerical Recipes §6.2)."""
    if x <= 0.0:
        return 0.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1.0:
        term = total = 1.0 / a
        ap = a
        for _ in range(100_000):
            ap += 1.0
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return min(1.0, total * math.exp(log_front))
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 100_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return max(0.0, 1.0 - math.exp(log_front) * h)


def chi2_cdf(x: float, df: float) -> float:
    """P(χ²(df) ≤ x)."""
    return _gamma_p(df / 2.0, x / 2.0)


def chi2_quantile_wh(p: float, df: float) -> float:
    """The Wilson–Hilferty approximation of χ²'s p-quantile (good to about 1% from df ≈ 5)."""
    z = NormalDist().inv_cdf(p)
    h = 2.0 / (9.0 * df)
    return df * max(0.0, 1.0 - h + z * math.sqrt(h)) ** 3


def chi2_quantile(p: float, df: float) -> float:
    """χ²'s p-quantile: the exact CDF inverted by bisection (Wilson–Hilferty to bracket it)."""
    if not (0.0 < p < 1.0 and df > 0.0):
        raise ValueError(f"chi2_quantile needs 0 < p < 1 and df > 0, not p={p}, df={df}")
    guess = chi2_quantile_wh(p, df)
    lo, hi = 0.0, max(2.0 * guess, df + 20.0 * math.sqrt(2.0 * df) + 20.0)
    while chi2_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if chi2_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def sigma_upper(sigma: float, dof: float, confidence: float = CONFIDENCE) -> float:
    """One-sided upper confidence bound on σ̂ = ``sigma`` with ``dof`` degrees of freedom."""
    if sigma == 0.0:
        return 0.0
    return sigma * math.sqrt(dof / chi2_quantile(1.0 - confidence, dof))


def lower_tail(tolerance: float, sigma: float) -> float:
    """P(change < −tolerance) for a clean change ~ N(0, σ²): a one-sided gate."""
    if sigma == 0.0:
        return 0.0
    return normal_cdf(-tolerance / sigma)


def two_sided(tolerance: float, sigma: float) -> float:
    """P(|change| > tolerance) for a clean change ~ N(0, σ²): a gate that fails both ways."""
    return 2.0 * lower_tail(tolerance, sigma)


def retimed_red(tolerance: float, sigma: float, shared: float) -> float:
    """P(a clean CUDA-event speedup check ends red) under re-measurement of borderline falls;
    ``shared`` is the share of σ² common to every pass (the check's offset from its baseline)."""
    if sigma == 0.0:
        return 0.0
    shared = min(1.0, max(0.0, shared))
    sb, se = sigma * math.sqrt(shared), sigma * math.sqrt(1.0 - shared)
    if se < 1e-3 * sigma:  # passes all but identical: re-measuring cannot help
        return lower_tail(tolerance, sigma)
    if sb == 0.0:
        return float(_retimed_given_b(np.zeros(1), tolerance, se)[0])
    step = min(sb, se) / 10.0
    b = np.arange(-12.0 * sb, 12.0 * sb + step, step)
    density = np.exp(-0.5 * (b / sb) ** 2) / (sb * math.sqrt(2.0 * math.pi))
    return float(min(1.0, np.sum(_retimed_given_b(b, tolerance, se) * density) * step))


def _retimed_given_b(b: np.ndarray, tolerance: float, se: float) -> np.ndarray:
    """P(red | offset b) for independent process noise of standard deviation ``se``."""
    erfc = np.vectorize(math.erfc, otypes=[float])
    q = 0.5 * erfc((tolerance + b) / (se * math.sqrt(2.0)))  # P(x < −τ | b)
    r = 0.5 * erfc((BORDERLINE_FACTOR * tolerance + b) / (se * math.sqrt(2.0)))  # P(x < −3τ | b)
    passes = RETIMES + 1  # odd: the median is the middle pass
    need = passes // 2  # of the RETIMES others below −τ, besides the first
    others = sum(math.comb(RETIMES, j) * q**j * (1.0 - q) ** (RETIMES - j) for j in range(need, RETIMES + 1))
    return r + (q - r) * others


_RELATIVE = re.compile(r"±(\d+(?:\.\d+)?)%(?: \(tolerance ±(\d+(?:\.\d+)?)%, widened by measured noise\))?")
_BOUND = re.compile(r"(<=|>=|<|>|==) (-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)x")


@dataclass
class Check:
    """One check of one variant, over every run of its suite."""

    suite: str
    case: str
    variant: str
    kind: str
    quantity: str
    tolerance: str  # as written (the first run's; a widened CUDA-event band gives its base)
    samples: list[float] = field(default_factory=list)  # changes (relative gates) or values (bounds)
    red: int = 0  # runs in which it was REGRESSED or WRONG
    remeasured: int = 0  # runs in which it was re-measured (its sample a median of timed passes)


@dataclass
class Study:
    """What the runs hold: each gated check's samples, and how many runs of each suite."""

    checks: dict[tuple[str, str, str, str, str], Check] = field(default_factory=dict)
    runs: Counter[str] = field(default_factory=Counter)
    red_suite_runs: int = 0
    planted_left_out: int = 0


def read(paths: Sequence[str]) -> Study:
    """Every gated check of every run, planted variants left out; InputError for a bad file."""
    study = Study()
    for path in paths:
        try:
            suites = read_results(Path(path))
        except FuseciError as exc:
            raise InputError(str(exc)) from None
        for i, suite in enumerate(suites):
            study.runs[suite.suite] += 1
            suite_red = False
            for j, case in enumerate(suite.cases):
                planted = {k.variant for k in case.checks if k.check is CheckKind.PLANTED}
                for n, k in enumerate(case.checks):
                    if k.variant in planted:
                        study.planted_left_out += 1
                        continue
                    red = k.verdict in (Verdict.REGRESSED, Verdict.WRONG)
                    suite_red |= red
                    tolerance, change = ("" if k.not_gated else k.tolerance), k.change
                    if k.band is not None and k.quantity != EVENT_TIME and change is not None:
                        tolerance, change = BANDED, change / k.band  # in units of its band: red beyond 1
                    if k.check.value in BOUND_KINDS:
                        sample = k.current
                        if sample is None or not _BOUND.fullmatch(tolerance):
                            continue  # nothing measured, or not a bound this tool knows
                    elif change is not None and tolerance:  # no tolerance: a warning, never red
                        sample = change
                        if tolerance not in ("exact", BANDED) and not _RELATIVE.fullmatch(tolerance):
                            where = f"suites[{i}].cases[{j}].checks[{n}].tolerance"
                            raise InputError(
                                f"{path}: {where}: {tolerance!r} is neither 'exact' nor '±X%'; {USAGE_FIX}"
                            )
                    else:
                        continue  # not judged against a baseline (no baseline yet, or no change to speak of)
                    key = (suite.suite, case.case, k.variant, k.check.value, k.quantity)
                    check = study.checks.setdefault(key, Check(*key, tolerance=_base_tolerance(tolerance)))
                    check.samples.append(sample)
                    check.red += red
                    check.remeasured += k.timed_passes > 1
            study.red_suite_runs += suite_red
    return study


def _base_tolerance(text: str) -> str:
    """The suite's tolerance behind a check's: ``±12.3% (tolerance ±10%, widened ...)`` is ±10%."""
    m = _RELATIVE.fullmatch(text)
    if m and m.group(2):
        return f"±{m.group(2)}%"
    return text


def _percent(tolerance: str) -> float:
    if tolerance == BANDED:  # the change is in units of the check's own band
        return 1.0
    m = _RELATIVE.fullmatch(tolerance)
    assert m, tolerance
    return float(m.group(1)) / 100.0


@dataclass
class Spread:
    """The fitted spread of one gate's clean samples."""

    n: int  # samples
    k: int  # distinct checks
    sigma: float  # point estimate
    dof: float  # degrees of freedom behind it
    shared: float  # share of the variance common to every run of one check (its baseline's offset)

    @property
    def upper(self) -> float:
        """The upper confidence bound."""
        return sigma_upper(self.sigma, self.dof) if self.dof > 0 else math.inf

    @property
    def text(self) -> str:
        """σ̂ with its upper bound and degrees of freedom, as the table shows it."""
        return f"{_fmt_pct(self.sigma)} (≤ {_fmt_pct(self.upper)}, ν={self.dof:.0f})"


def change_spread(groups: Sequence[Sequence[float]]) -> Spread:
    """The spread of clean changes from the baseline: σ̂ their root mean square, ν = n / (1 + (m − 1)·ρ)."""
    xs = [np.asarray(g, dtype=float) for g in groups if len(g)]
    n, k = sum(len(g) for g in xs), len(xs)
    sigma = math.sqrt(sum(float(np.sum(g * g)) for g in xs) / n)
    within_dof = n - k
    if within_dof == 0:  # one sample per check: nothing tells the offset from the process noise
        return Spread(n, k, sigma, float(n), 1.0)
    within = sum(float(np.sum((g - g.mean()) ** 2)) for g in xs) / within_dof
    between = max(0.0, float(np.mean([g.mean() ** 2 - within / len(g) for g in xs])))
    shared = between / (between + within) if between + within > 0 else 0.0
    m = n / k
    return Spread(n, k, sigma, n / (1.0 + (m - 1.0) * shared), shared)


def value_spread(groups: Sequence[Sequence[float]]) -> Spread:
    """The relative spread of a value within each check (pooled, ν = n − k), for bounds."""
    xs = [np.asarray(g, dtype=float) for g in groups if len(g)]
    n, k = sum(len(g) for g in xs), len(xs)
    ss = sum(float(np.sum((g / g.mean() - 1.0) ** 2)) for g in xs if g.mean() != 0)
    dof = n - k
    return Spread(n, k, math.sqrt(ss / dof) if dof else math.nan, float(dof), 0.0)


@dataclass
class Row:
    """One gate of the table."""

    gate: str
    per_run: float  # checks of this gate in one full run
    n: int
    k: int
    spread: str
    tolerance: str
    per_check: str
    expected: float  # expected false red checks per run (its share of the union bound); NaN: not modelled
    note: str = ""
    broken: bool = False  # an exact gate that moved in clean runs: its assumption does not hold


#: Below this a probability is shown as a bound: the normal model says nothing that far out.
SHOWN_FLOOR = 1e-12


def _fmt_p(p: float) -> str:
    if p < SHOWN_FLOOR:
        return f"< {SHOWN_FLOOR:.0e}"
    if p >= 0.001:
        return f"{p:.3f}"
    return f"{p:.1e}"


def _fmt_pct(x: float) -> str:
    return "∞" if math.isinf(x) else f"{x:.3%}"


def _tolerances(checks: Iterable[Check]) -> str:
    found = sorted({c.tolerance for c in checks}, key=lambda t: (len(t), t))
    return ", ".join(found)


def estimate(study: Study) -> list[Row]:
    """One row per gate: relative gates modelled, exact gates counted, bounds by their margins."""
    groups: dict[tuple[str, str], list[Check]] = defaultdict(list)
    for c in study.checks.values():
        if c.kind in BOUND_KINDS:
            family = "bound"
        elif c.tolerance == "exact":
            family = "exact"
        else:
            family = "relative"
        quantity = c.quantity if c.kind != "bytes" else "bytes over the minimum"
        groups[(family, quantity + (" (its own band)" if c.tolerance == BANDED else ""))].append(c)
    rows = []
    order = {"relative": 0, "bound": 1, "exact": 2}
    for (family, quantity), checks in sorted(groups.items(), key=lambda item: (order[item[0][0]], item[0][1])):
        per_run = sum(len(c.samples) / study.runs[c.suite] for c in checks)
        n, k = sum(len(c.samples) for c in checks), len(checks)
        if family == "exact":
            moved = sum(abs(x) > EXACT_SLACK for c in checks for x in c.samples)
            rows.append(
                Row(
                    quantity,
                    per_run,
                    n,
                    k,
                    f"{moved} of {n} moved",
                    "exact",
                    "not modelled",
                    math.nan,
                    note="assumed deterministic (exact counters of deterministic kernels)",
                    broken=moved > 0,
                )
            )
        elif family == "relative":
            rows.append(_relative_row(study, quantity, checks, per_run))
        else:
            rows.append(_bound_row(study, quantity, checks, per_run))
    return rows


def _relative_row(study: Study, quantity: str, checks: list[Check], per_run: float) -> Row:
    s = change_spread([c.samples for c in checks])
    if s.sigma == 0.0:  # theoretical occupancy, fixed by the launch configuration
        return Row(
            quantity, per_run, s.n, s.k, f"0 of {s.n} moved", _tolerances(checks), "not modelled", math.nan,
            note="never moved: assumed deterministic",
        )  # fmt: skip
    up = s.upper
    expected = 0.0
    probs = []
    sides = "lower tail"
    for c in checks:
        tau = _percent(c.tolerance)
        if c.quantity == EVENT_TIME and c.kind == "gain":
            p = retimed_red(tau, up, s.shared)
            sides = f"re-measured, ρ={s.shared:.2f}"
        elif c.quantity.startswith(FAILS_HIGH):  # a count: a rise fails (N(0, σ²) is symmetric)
            p = lower_tail(tau, up)
            sides = "upper tail" + (" (in units of each check's band)" if c.tolerance == BANDED else "")
        elif c.kind in FAILS_LOW:
            p = lower_tail(tau, up)
        else:  # a gate this tool does not know: both ways, to be safe
            p = two_sided(tau, up)
            sides = "two-sided"
        probs.append(p)
        expected += len(c.samples) / study.runs[c.suite] * p
    remeasured = sum(c.remeasured for c in checks)
    note = sides + (f"; {remeasured} sample(s) a median of re-measured passes" if remeasured else "")
    per_check = _fmt_p(max(probs)) if len(set(probs)) == 1 else f"{_fmt_p(min(probs))}–{_fmt_p(max(probs))}"
    return Row(quantity, per_run, s.n, s.k, s.text, _tolerances(checks), per_check, expected, note=note)


def _bound_row(study: Study, quantity: str, checks: list[Check], per_run: float) -> Row:
    name = quantity if quantity == "bytes over the minimum" else f"expect {quantity}"
    s = value_spread([c.samples for c in checks])
    exact = [c for c in checks if c.tolerance.startswith("==")]
    moved = sum(abs(x - float(np.mean(c.samples))) > EXACT_SLACK * abs(x) for c in exact for x in c.samples)
    if exact and len(exact) == len(checks):
        return Row(
            name, per_run, s.n, s.k, f"{moved} of {s.n} moved", "== bound", "not modelled", math.nan,
            note="assumed deterministic (exact counters of deterministic kernels)", broken=moved > 0,
        )  # fmt: skip
    if s.sigma == 0.0 or not s.dof:
        why = "never moved" if s.sigma == 0.0 else "one run: no spread to fit"
        red = sum(c.red for c in checks)
        return Row(
            name, per_run, s.n, s.k, why, _tolerances(checks), "not modelled", math.nan,
            note=f"{red} red in clean runs", broken=red > 0,
        )  # fmt: skip
    up = s.upper
    expected, margins = 0.0, []
    for c in checks:
        m = _BOUND.fullmatch(c.tolerance)
        assert m
        op, bound = m.group(1), float(m.group(2))
        mean = float(np.mean(c.samples))
        if op == "==" or mean == 0:
            continue
        margin = (mean - bound) / abs(mean) if op in (">=", ">") else (bound - mean) / abs(mean)
        margins.append(margin)
        expected += len(c.samples) / study.runs[c.suite] * lower_tail(margin, up)
    smallest = min(margins) if margins else math.inf
    tolerance = f"margin ≥ {_fmt_pct(smallest)}"
    per_check = _fmt_p(lower_tail(smallest, up)) + " (smallest margin)"
    return Row(name, per_run, s.n, s.k, s.text, tolerance, per_check, expected, note="margin to the bound")


def render(study: Study, rows: list[Row], budget: float) -> tuple[str, bool]:
    """The Markdown table and its verdict lines; True when the budget is met."""
    out = [
        "| gate | checks per run | samples (checks) | spread σ̂ (95% upper bound) | tolerance | P(false red) per check | false red runs per 1,000 | model |",
        "|---|---:|---:|---|---|---|---:|---|",
    ]
    for r in rows:
        per_1000 = "—" if math.isnan(r.expected) else _fmt_p(1000 * min(1.0, r.expected))
        out.append(
            f"| {r.gate} | {r.per_run:.0f} | {r.n} ({r.k}) | {r.spread} | {r.tolerance} | {r.per_check} | {per_1000} | {r.note} |"
        )
    total = 1000 * min(1.0, sum(r.expected for r in rows if not math.isnan(r.expected)))
    broken = [r.gate for r in rows if r.broken]
    checks_per_run = sum(r.per_run for r in rows)
    clean = sum(len(c.samples) for c in study.checks.values())
    red = sum(c.red for c in study.checks.values())
    suite_runs = sum(study.runs.values())
    met = total <= budget and not broken
    out += [
        "",
        f"Gated checks per full run: {checks_per_run:.0f} (over {len(study.runs)} suites, {suite_runs} suite runs; "
        f"{study.planted_left_out} checks of planted variants left out).",
        f"Observed: {red} red of {clean} clean gated checks; {study.red_suite_runs} of {suite_runs} suite runs red.",
        "Spread: σ̂ is the root mean square of the clean changes from the baseline (of the value within a check, "
        f"for bounds); the bound is one-sided {CONFIDENCE:.0%}, √(ν/χ²) with ν effective samples.",
        f"Expected false red runs: {_fmt_p(total)} per 1,000 clean runs (union bound over the modelled gates; "
        f"budget ≤ {budget:g}): {'met' if met else 'NOT met'}.",
    ]
    if broken:
        out.append(
            f"Gates not modelled that moved or went red in clean runs: {', '.join(broken)}; the budget cannot be met."
        )
    return "\n".join(out), met


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", metavar="RUN.json", help="results of `fuseci run --json` (a noise study)")
    parser.add_argument(
        "--budget", type=float, default=1.0, help="false red runs allowed per 1,000 clean runs (default 1)"
    )
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 3
    if not (args.budget >= 0 and math.isfinite(args.budget)):
        print(
            f"false_alarm.py: --budget {args.budget} is not a number of runs ≥ 0; give e.g. --budget 1", file=sys.stderr
        )
        return 3
    try:
        study = read(args.runs)
    except InputError as exc:
        print(f"false_alarm.py: {exc}", file=sys.stderr)
        return 3
    if not study.checks:
        print(
            f"false_alarm.py: {', '.join(args.runs)}: no clean check judged against a baseline; run the noise study "
            "against recorded baselines (tools/noise-study.sh)",
            file=sys.stderr,
        )
        return 3
    text, met = render(study, estimate(study), args.budget)
    print(text)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
