"""Synthetic inputs for the CPU scale benchmarks of docs/BENCHMARKS.md, built from the recorded
reports in tests/data/reports (no GPU needed).

    python tools/synthetic_runs.py runs DIR [--runs 2000] [--suites all] [--seed 1]
    python tools/synthetic_runs.py results FILE [--cases 5000] [--message-chars 0]

``runs`` writes ``--runs`` copies of the chosen suites' recorded run into DIR, an hour apart, each
with its own noise and two planted steps (elementwise's fused ``scale_relu_add`` 10% slower from
60% of the runs on, recovered at 80%). ``results`` writes one suite of ``--cases`` copies of the
recorded regressed elementwise cases; ``--message-chars`` pads every check's message.

Run from the repository root (the suite files are found relative to it).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import random
import subprocess
import sys
import tempfile
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from fuseci.store import results

REPORTS = Path("tests/data/reports")
SHIPPED = ("elementwise", "reduction", "normalization", "stencil", "mutants")
START = datetime(2026, 1, 1, tzinfo=timezone.utc)
_TIMES = ("median_ns", "min_ns", "max_ns", "q1_ns", "q3_ns", "iqr_ns")


def _fuseci(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "fuseci", *args, "-q"], capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"fuseci {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")


def _recorded_run(suites: list[str], work: Path) -> dict[str, Any]:
    """One run file holding each suite re-analysed from its recorded report."""
    doc: dict[str, Any] | None = None
    for suite in suites:
        out = work / suite
        report = str(REPORTS / f"{suite}.ncu-rep.xz")
        _fuseci("run", f"suites/{suite}.yaml", "--from-report", report, "--results-dir", str(out))
        (path,) = out.glob("*.json")
        part = json.loads(path.read_text())
        if doc is None:
            doc = part
        else:
            doc["suites"].update(part["suites"])
    assert doc is not None
    return doc


def _noisy_suite(suite: dict[str, Any], rng: random.Random, slower: set[tuple[str, str]], step: float) -> None:
    """Multiply a suite's kernel durations, DRAM bytes and timings by noise (and ``step`` for ``slower``)."""
    for k in suite["kernels"]:
        key = (k["case"], k["variant"])
        t = math.exp(rng.gauss(0, 0.005)) * (step if key in slower else 1.0)
        b = math.exp(rng.gauss(0, 0.0005))
        k["gpu__time_duration.sum"] *= t
        for side in ("read", "write"):
            k[f"dram__bytes_{side}.sum"] *= b
            if k.get(f"dram__bytes_{side}.sum.per_second") is not None:
                k[f"dram__bytes_{side}.sum.per_second"] *= b / t
    for cid, case in suite["record"]["cases"].items():
        for timing in case.get("timings", []):
            f = math.exp(rng.gauss(0, 0.005)) * (step if (cid, timing["variant"]) in slower else 1.0)
            for field in _TIMES:
                if timing.get(field) is not None:
                    timing[field] *= f
            if timing.get("samples_ns"):
                timing["samples_ns"] = [s * f for s in timing["samples_ns"]]


def make_runs(directory: Path, runs: int, suites: list[str], seed: int) -> None:
    """Write ``runs`` run files into ``directory`` (see the module docstring)."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        base = _recorded_run(suites, Path(tmp))
    for i in range(runs):
        doc = copy.deepcopy(base)
        created = START + timedelta(hours=i)
        sha = f"{rng.getrandbits(160):040x}"
        doc["created"] = created.strftime("%Y-%m-%dT%H:%M:%SZ")
        doc["git_commit"] = sha
        slower = {("scale_relu_add", "fused")} if 0.6 * runs <= i < 0.8 * runs else set()
        for sid, suite in doc["suites"].items():
            _noisy_suite(suite, rng, slower if sid == "elementwise" else set(), 1.10)
        name = f"{created:%Y%m%dT%H%M%SZ}-nvidia-h200-{sha[:7]}.json"
        (directory / name).write_text(json.dumps(doc, indent=1, allow_nan=True) + "\n")


def make_results(path: Path, cases: int, message_chars: int) -> None:
    """Write one results file of a suite with ``cases`` cases (see the module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "results.json"
        report = REPORTS / "elementwise-regressed.ncu-rep.xz"
        _fuseci("run", "suites/elementwise.yaml", "--from-report", str(report), "--json", str(out))
        (suite,) = results.read_results(out)
    built = []
    for n in range(cases):
        case = suite.cases[n % len(suite.cases)]
        cid = f"{case.case}_{n:05d}"
        checks = tuple(
            replace(k, case=cid, message=(k.message + " " + "x" * message_chars)[:message_chars] or k.message)
            for k in case.checks
        )
        built.append(replace(case, case=cid, checks=checks))
    path.write_text(results.dumps([replace(suite, cases=tuple(built))]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    r = sub.add_parser("runs", help="run files for `fuseci history`")
    r.add_argument("directory", type=Path)
    r.add_argument("--runs", type=int, default=2000)
    r.add_argument("--suites", default="all", help="'all' (every shipped suite) or a comma-separated list")
    r.add_argument("--seed", type=int, default=1)
    m = sub.add_parser("results", help="a results file for `fuseci merge`")
    m.add_argument("path", type=Path)
    m.add_argument("--cases", type=int, default=5000)
    m.add_argument("--message-chars", type=int, default=0)
    args = parser.parse_args()
    if args.what == "runs":
        suites = list(SHIPPED) if args.suites == "all" else args.suites.split(",")
        make_runs(args.directory, args.runs, suites, args.seed)
    else:
        make_results(args.path, args.cases, args.message_chars)


if __name__ == "__main__":
    main()
