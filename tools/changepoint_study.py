"""Measure fuseci's change-point search against ruptures' searches on the same cost, for
docs/REPORTS.md ("Why this search") and docs/BENCHMARKS.md ("On a CPU").

    python tools/changepoint_study.py [--repeats 3]

Every series is in the search's own units; a stable series is Gaussian noise of 0.1 units and a
step or dip moves it by 3. Prints Markdown: the time of one gain's search per history length
(best of ``--repeats``), how many dips of a few runs each search finds, and how often fuseci's
answer is the exact PELT's on random histories.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np
import ruptures

from fuseci.judge import history

SCALE = math.log1p(0.03)  # a ±3% gate
LENGTHS = (1000, 2000, 4000, 16000)


def _gains(units: np.ndarray) -> list[float]:
    return [float(v) for v in 2.0 * np.exp(units * SCALE)]


def _searches() -> dict[str, tuple[Callable[[np.ndarray], list[int]], int]]:
    """name → (search over a series in units, longest history it is timed on)."""

    def signal(y: np.ndarray) -> np.ndarray:
        return (y - np.median(y)).reshape(-1, 1)

    pen = history.PENALTY
    return {
        'ruptures `Pelt(model="l2")`': (
            lambda y: ruptures.Pelt(model="l2", min_size=1, jump=1).fit(signal(y)).predict(pen=pen)[:-1],
            2000,
        ),
        'ruptures `KernelCPD(kernel="linear")`': (
            lambda y: ruptures.KernelCPD(kernel="linear", min_size=1).fit(signal(y)).predict(pen=pen)[:-1],
            16000,
        ),
        'ruptures `Binseg(model="l2")`': (
            lambda y: ruptures.Binseg(model="l2", min_size=1, jump=1).fit(signal(y)).predict(pen=pen)[:-1],
            4000,
        ),
        "fuseci (seeded binary segmentation + optimal partitioning)": (
            lambda y: history.change_points(_gains(y), 0.03),
            16000,
        ),
    }


def _timed(search: Callable[[np.ndarray], list[int]], y: np.ndarray, repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        search(y)
        best = min(best, time.perf_counter() - start)
    return best


def _time_text(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.1f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(2026)
    searches = _searches()

    print("| search, one gain | " + " | ".join(f"{n:,} runs" for n in LENGTHS) + " |")
    print("|---|" + "---:|" * len(LENGTHS))
    stable = {n: rng.normal(0.0, 0.1, n) for n in LENGTHS}
    for name, (search, longest) in searches.items():
        cells = [_time_text(_timed(search, stable[n], args.repeats)) if n <= longest else "–" for n in LENGTHS]
        print(f"| {name} | " + " | ".join(cells) + " |")

    print()
    dips = (1, 2, 5, 10, 50)
    print("| search | " + " | ".join(f"dip of {d} run{'s' if d > 1 else ''}" for d in dips) + " |")
    print("|---|" + "---:|" * len(dips))
    for name, (search, _) in searches.items():
        if name.startswith("ruptures `Pelt"):  # the same answers as KernelCPD's PELT, 25 s a search
            continue
        cells = []
        for length in dips:
            found = 0
            for _ in range(20):
                y = rng.normal(0.0, 0.1, 2000)
                at = 1000 + int(rng.integers(-300, 300))
                y[at : at + length] -= 3.0
                got = [int(i) for i in search(y)]
                found += at in got and at + length in got
            cells.append(f"{found}/20")
        print(f"| {name} | " + " | ".join(cells) + " |")

    exact = searches['ruptures `KernelCPD(kernel="linear")`'][0]
    same = 0
    trials = 300
    for _ in range(trials):
        y = rng.normal(0.0, 0.3, 300)
        for _ in range(int(rng.integers(0, 6))):
            y[int(rng.integers(1, 300)) :] += rng.choice([-1, 1]) * rng.uniform(1, 6)
        same += [int(i) for i in exact(y)] == history.change_points(_gains(y), 0.03)
    print(f"\nfuseci's change points equal the exact PELT's on {same} of {trials} random histories of 300 runs")


if __name__ == "__main__":
    main()
