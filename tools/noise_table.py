"""Summarise a noise study (tools/noise-study.sh): per suite and gated check, how far the runs
moved from the baseline, and every verdict that was not a pass.

    python tools/noise_table.py RUN.json [RUN.json ...]

Prints one Markdown table: for each suite and gated quantity, the checks, the largest change from
the baseline and the largest spread of one check's change across runs (planted variants left
out); then the verdict counts.
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from pathlib import Path

from fuseci.judge.verdict import CheckKind
from fuseci.store.results import read_results


def main(paths: list[str]) -> None:
    changes: dict[tuple[str, str], dict[tuple[str, str], list[float]]] = defaultdict(lambda: defaultdict(list))
    verdicts: dict[str, Counter[str]] = defaultdict(Counter)
    runs: Counter[str] = Counter()
    for path in paths:
        for result in read_results(Path(path)):
            runs[result.suite] += 1
            for case in result.cases:
                planted = {k.variant for k in case.checks if k.check is CheckKind.PLANTED}
                for k in case.checks:
                    verdicts[result.suite][k.verdict.value] += 1
                    gated = k.check in (CheckKind.GAIN, CheckKind.VALUE) and k.variant not in planted
                    if gated and k.change is not None:
                        changes[(result.suite, k.quantity)][(case.case, k.variant)].append(k.change)
    print("| suite | runs | gated quantity | checks | largest change | largest spread |")
    print("|---|---:|---|---:|---:|---:|")
    for (suite, quantity), by_check in sorted(changes.items()):
        largest = max(abs(c) for cs in by_check.values() for c in cs)
        spread = max(max(cs) - min(cs) for cs in by_check.values())
        print(f"| {suite} | {runs[suite]} | {quantity} | {len(by_check)} | {largest:.2%} | {spread:.2%} |")
    print()
    for suite, counts in sorted(verdicts.items()):
        print(f"{suite}: " + ", ".join(f"{n} {v}" for v, n in counts.most_common()))


if __name__ == "__main__":
    main(sys.argv[1:])
