"""What ncu's replay, cache and clock settings do to the fusion gains (docs/BENCHMARKS.md).

Run on a GPU machine from the repository root with fuseci installed and ncu on PATH::

    python3 tools/ncu_settings_study.py WORKDIR [SUITE ...]

For each suite (default: elementwise and normalization) it profiles the suite once per setting
of :data:`SETTINGS` through ``fuseci run`` (``STUDY_SETTINGS``, comma-separated labels, limits
them), then once by hand with ``--replay-mode range``, which fuseci does not offer. Prints, per
case, the DRAM bytes and duration gains under each setting, and the replay passes; writes
everything to WORKDIR/settings.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from fuseci.store.results import read_results

SETTINGS = {
    "kernel/all/none": {"replay_mode": "kernel", "cache_control": "all", "clock_control": "none"},
    "kernel/none/none": {"replay_mode": "kernel", "cache_control": "none", "clock_control": "none"},
    "app/none/none": {"replay_mode": "application", "cache_control": "none", "clock_control": "none"},
    "kernel/all/base": {"replay_mode": "kernel", "cache_control": "all", "clock_control": "base"},
}
GAINS = ("dram__bytes.sum", "gpu__time_duration.sum")
RANGE_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum")


def fuseci_gains(work: Path, suite: str, label: str, ncu: dict[str, str]) -> dict[str, dict[str, float]]:
    doc = yaml.safe_load(Path(f"suites/{suite}.yaml").read_text())
    doc["ncu"] = {**doc.get("ncu", {}), **ncu}
    for case in doc["cases"]:  # gains only: the timed pass is not what is studied here
        case.setdefault("gates", {})["event_time"] = "off"
    path = work / label.replace("/", "-") / f"{suite}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = path.with_suffix(".json")
    argv = ["fuseci", "run", str(path), "--baselines", str(work / "none"), "--report-dir", str(path.parent)]
    subprocess.run([*argv, "--json", str(out)], check=False, capture_output=True)
    result: dict[str, dict[str, float]] = {}
    for case in read_results(out)[0].cases:
        for v in case.variants:
            if v.variant != "unfused" and v.gains:
                result[case.case] = {q: v.gains[q] for q in GAINS}
                result[case.case]["passes"] = v.values["profiler__replayer_passes"]
    return result


def range_gains(work: Path, suite: str) -> dict[str, dict[str, float]]:
    sys.path.insert(0, "/opt/nvidia/nsight-compute/2025.3.1/extras/python")
    import ncu_report

    d = work / "range"
    d.mkdir(parents=True, exist_ok=True)
    rep = d / f"{suite}.ncu-rep"
    cmd = [
        "ncu", "--config-file", "off", "--nvtx", "--nvtx-include", f"regex:^fuseci:{suite}:.*/",
        "--replay-mode", "range", "--cache-control", "all", "--clock-control", "none",
        "--metrics", ",".join(RANGE_METRICS),
        "--export", str(rep), "--force-overwrite", "--log-file", str(d / f"{suite}.ncu.log"),
        sys.executable, "-m", "fuseci.harness", f"suites/{suite}.yaml", "--record", str(d / f"{suite}.harness.json"),
    ]  # fmt: skip
    subprocess.run(cmd, check=False, capture_output=True)
    # Range results are all named "range"; they come in the order the harness ran the ranges.
    from fuseci.config.parse import load_suite

    order = [(c.id, v.id) for c in load_suite(f"suites/{suite}.yaml").cases for v in c.variants]
    results = []
    ctx = ncu_report.load_report(str(rep))
    for i in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(i)
        for j in range(rng.num_actions()):
            a = rng.action_by_idx(j)
            read, write, duration = (a.metric_by_name(q).as_double() for q in RANGE_METRICS)
            results.append({"dram__bytes.sum": read + write, "gpu__time_duration.sum": duration})
    if len(results) != len(order):
        raise RuntimeError(f"{len(results)} range results for {len(order)} variant ranges")
    values = dict(zip(order, results, strict=True))
    out: dict[str, dict[str, float]] = {}
    for (case, variant), v in values.items():
        if variant != "unfused" and (case, "unfused") in values:
            u = values[(case, "unfused")]
            out[case] = {q: u[q] / v[q] for q in GAINS if v[q]}
    return out


def main() -> None:
    work = Path(sys.argv[1])
    suites = sys.argv[2:] or ["elementwise", "normalization"]
    table: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    settings = {
        k: v for k, v in SETTINGS.items() if k in os.environ.get("STUDY_SETTINGS", ",".join(SETTINGS)).split(",")
    }
    for suite in suites:
        table[suite] = {label: fuseci_gains(work, suite, label, s) for label, s in settings.items()}
        try:
            table[suite]["range/all/none"] = range_gains(work, suite)
        except Exception as exc:  # a study: say what range replay did, keep the rest
            print(f"range replay of {suite} failed: {type(exc).__name__}: {exc}")
            table[suite]["range/all/none"] = {}
    (work / "settings.json").write_text(json.dumps(table, indent=2))
    labels = [*settings, "range/all/none"]
    for q in GAINS:
        print(f"\n{q} gain (unfused ÷ fused)")
        print(f"{'case':24s}" + "".join(f"{lab:>18s}" for lab in labels))
        for suite in suites:
            for case in table[suite][labels[0]]:
                cells = [table[suite][lab].get(case, {}).get(q) for lab in labels]
                print(f"{case:24s}" + "".join(f"{c:18.2f}" if c else f"{'-':>18s}" for c in cells))
    print("\nreplay passes:", {s: sorted({v.get("passes") for v in table[s][labels[0]].values()}) for s in suites})


if __name__ == "__main__":
    main()
