"""The sensitivity card: how small a planted change each gate detects, and how often it cries wolf.

Run on a GPU machine from the repository root, with fuseci installed and ncu on PATH::

    python3 tools/sensitivity_study.py WORKDIR [--runs 10]

It records a baseline of ``tools/sensitivity/suite.yaml`` (the healthy fused kernel and graded
planted regressions of it, kernels/sensitivity.py), then runs the suite ``--runs`` times against
it with ``fuseci run --json``, as CI would. It prints, per gate, how many runs caught each planted
change and the false alarms among the clean samples, at the default tolerance and at others;
also written to WORKDIR/sensitivity.md. ``--analyse`` re-prints the tables without a GPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from fuseci.judge.verdict import CheckKind, MetricDelta, Verdict
from fuseci.store.results import read_results

SUITE = "tools/sensitivity/suite.yaml"
CLEAN = ("fused", "control")
PLANTED = {
    "dram__bytes.sum": ("bytes_0_5", "bytes_1", "bytes_2", "bytes_5", "bytes_10"),
    "bytes": ("bytes_0_5", "bytes_1", "bytes_2", "bytes_5", "bytes_10"),
    "gpu__time_duration.sum": ("time_5", "time_10", "time_20", "time_40"),
    "event_time": ("time_5", "time_10", "time_20", "time_40"),
    "host_blocking": ("host_sync",),
    "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum": ("sector_1", "bytes_0_5"),
    "lts__t_bytes_srcunit_tex_op_read.sum": ("sector_1", "bytes_0_5"),
    "smsp__inst_executed.sum": ("sector_1", "time_5"),
}
#: Gates on a variant's own exact count: the planted change is shown as a difference, not a ratio.
COUNTED = (
    "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum",
    "lts__t_bytes_srcunit_tex_op_read.sum",
    "smsp__inst_executed.sum",
)
#: Calibrates the chains of every time_P variant for the suite's tensor size (64 Mi floats).
CALIBRATE = (
    "from kernels.sensitivity import _spin_for\n"
    "for percent in (5, 10, 20, 40):\n"
    "    print(f'time_{percent}: a chain of', _spin_for(1 << 26, percent), 'fmas', flush=True)\n"
)
#: The tolerances a suite could set, per gain, to show what a tighter or looser gate would do.
WHAT_IF = {
    "dram__bytes.sum": (0.005, 0.01, 0.02, 0.03),
    "gpu__time_duration.sum": (0.05, 0.10, 0.15),
    "event_time": (0.05, 0.10),
}
LABELS = {
    "dram__bytes.sum": "DRAM bytes gain",
    "bytes": "bytes over the minimum",
    "gpu__time_duration.sum": "ncu duration gain",
    "event_time": "CUDA-event speedup",
    "host_blocking": "asynchrony (host blocking)",
    "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum": "global bytes loaded",
    "lts__t_bytes_srcunit_tex_op_read.sum": "L2 bytes requested",
    "smsp__inst_executed.sum": "instructions executed",
}


def _fuseci(*args: str, log: Path) -> int:
    with log.open("w") as out:
        return subprocess.run(["fuseci", *args], stdout=out, stderr=subprocess.STDOUT, check=False).returncode


def measure(work: Path, runs: int) -> None:
    """Record the baseline, then run the suite ``runs`` times, each writing its JSON results."""
    (work / "runs").mkdir(parents=True, exist_ok=True)
    spins = work / "spins.json"
    spins.unlink(missing_ok=True)
    os.environ["FUSECI_SENSITIVITY_SPINS"] = str(spins.resolve())
    # The time_P chains, calibrated first in a process of their own: no run of the study calibrates.
    subprocess.run([sys.executable, "-c", CALIBRATE], check=True)
    rc = _fuseci(
        "update-baselines", SUITE, "--force", "--baselines", str(work / "baselines"), "--report-dir",
        str(work / "record"), log=work / "record.log",
    )  # fmt: skip
    print(f"baseline recorded (exit {rc})", flush=True)
    for i in range(1, runs + 1):
        rc = _fuseci(
            "run", SUITE, "--baselines", str(work / "baselines"), "--report-dir", str(work / "out"), "--json",
            str(work / "runs" / f"{i:02d}.json"), log=work / "runs" / f"{i:02d}.log",
        )  # fmt: skip
        print(f"run {i}/{runs}: exit {rc}", flush=True)
    print(f"fma chains: {spins.read_text().strip() if spins.exists() else 'none calibrated'}", flush=True)


#: The check kinds the study reads.
GATES = (CheckKind.GAIN, CheckKind.BYTES, CheckKind.ASYNCHRONY, CheckKind.VALUE)
RED = (Verdict.REGRESSED, Verdict.WRONG)


class Run:
    """One run of the study: its checks by (variant, gate), and each variant's values."""

    def __init__(self, path: Path) -> None:
        (suite,) = read_results(path)
        (case,) = [c for c in suite.cases if c.case == "scale_relu_add"]
        self.checks: dict[tuple[str, str], MetricDelta] = {
            (k.variant, k.check.value if k.check is CheckKind.BYTES else k.quantity): k
            for k in case.checks
            if k.check in GATES
        }
        self.values: dict[str, Mapping[str, float]] = {v.variant: v.values for v in case.variants}


def _planted_size(runs: list[Run], variant: str, gate: str) -> str:
    """The change the variant actually made, measured against the healthy kernel in each run."""
    if gate == "host_blocking":
        return "read-back of 1 float"
    quantity = "dram__bytes.sum" if gate == "bytes" else gate
    ratios, differences = [], []
    for r in runs:
        base, now = r.values.get("fused", {}).get(quantity), r.values.get(variant, {}).get(quantity)
        if base and now:
            ratios.append(now / base - 1)
            differences.append(now - base)
    if gate in COUNTED and differences:
        unit = "" if gate == "smsp__inst_executed.sum" else " B"
        return f"{statistics.median(differences):+,.0f}{unit} of {base:,.0f}{unit}"
    return f"+{statistics.median(ratios):.1%}" if ratios else "?"


def analyse(work: Path) -> str:
    """The Markdown tables of the study in ``work``."""
    runs = [Run(p) for p in sorted((work / "runs").glob("*.json"))]
    n = len(runs)
    lines = [
        f"{n} runs; clean samples: {', '.join(CLEAN)} in each run ({len(CLEAN) * n} in all).",
        "",
        "| gate | default | planted change (measured) | caught | false alarms (clean) |",
        "|---|---|---|---|---|",
    ]
    for gate, variants in PLANTED.items():
        default = next((r.checks[(v, gate)].tolerance for r in runs for v in CLEAN if (v, gate) in r.checks), "?")
        clean = sum(r.checks[(v, gate)].verdict in RED for r in runs for v in CLEAN if (v, gate) in r.checks)
        for i, variant in enumerate(variants):
            caught = sum(
                (k := r.checks.get((variant, gate))) is not None and k.verdict is Verdict.REGRESSED for r in runs
            )
            size = _planted_size(runs, variant, gate)
            lines.append(
                f"| {LABELS[gate] if i == 0 else ''} | {default if i == 0 else ''} | {variant} ({size}) | {caught}/{n} "
                f"| {f'{clean}/{len(CLEAN) * n}' if i == 0 else ''} |"
            )
    lines += ["", "What the recorded changes give at other tolerances (caught / false alarms):", ""]
    for gate, tolerances in WHAT_IF.items():
        variants = PLANTED[gate]
        lines += [f"| {LABELS[gate]} | " + " | ".join(variants) + " | clean |", "|---|" + "---|" * (len(variants) + 1)]
        for tol in tolerances:
            cells = []
            for v in (*variants, *CLEAN):
                changes = [c for r in runs if (k := r.checks.get((v, gate))) and (c := k.change) is not None]
                cells.append(sum(c < -tol for c in changes))
            clean = sum(cells[len(variants) :])
            lines.append(
                f"| ±{tol:.1%} | "
                + " | ".join(f"{c}/{n}" for c in cells[: len(variants)])
                + f" | {clean}/{len(CLEAN) * n} |"
            )
        lines.append("")
    worst = {
        gate: max(
            (abs(r.checks[(v, gate)].change or 0) for r in runs for v in CLEAN if (v, gate) in r.checks), default=0
        )
        for gate in WHAT_IF
    }
    lines.append("Largest change of a clean sample: " + ", ".join(f"{LABELS[g]} {w:.2%}" for g, w in worst.items()))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--analyse", action="store_true", help="only print the tables of an earlier study")
    args = parser.parse_args()
    if not args.analyse:
        measure(args.work, args.runs)
    table = analyse(args.work)
    (args.work / "sensitivity.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    sys.exit(main())
