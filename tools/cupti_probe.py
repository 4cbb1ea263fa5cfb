"""The in-process counters' probe: every kernel of each suite counted by CUPTI's Range Profiler
inside the harness (``FUSECI_CUPTI_PROBE``, :mod:`fuseci.harness.in_process`) and by ncu
(``fuseci run --report-dir``), in one call on one card, compared kernel by kernel.

    python3 tools/cupti_probe.py --out DIR suites/elementwise.yaml suites/models.yaml ...
    python3 tools/cupti_probe.py --out DIR --compare-only suites/...   # from DIR's files

A suite with ledger variants is measured from a copy beside it whose ledgers say
``repeats: every``, so ncu profiles every launch as the in-process path counts every launch.
Per suite DIR/<stem>/ holds the ncu report, the probe's JSON lines, each process's wall time
(``walls.json``) and the comparison (``compare.json``); the table printed last sums them up.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
#: Counters the gates hold exact: each must be bit-identical to ncu's.
EXACT = (
    "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum",
    "l1tex__m_xbar2l1tex_read_bytes_pipe_tma.sum",
    "l1tex__m_l1tex2xbar_write_bytes_mem_global_op_tma_st.sum",
    "smsp__inst_executed.sum",
    "lts__t_sectors_srcunit_tex_op_read.sum",
    "lts__t_sectors_srcunit_tex_op_write.sum",
)
#: Counters compared by their relative difference (they depend on caches, clocks or timing).
NEAR = (
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "gpu__time_duration.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
)
#: Launch shape: ncu's metric, the probe's launch field.
SHAPE = {
    "launch__grid_size": "grid",
    "launch__block_size": "block",
    "launch__registers_per_thread": "registers",
    "launch__shared_mem_per_block_static": "shared_static",
    "launch__shared_mem_per_block_dynamic": "shared_dynamic",
}


def probe_copy(suite: Path) -> Path:
    """The suite itself, or a copy beside it whose ledger variants repeat every launch."""
    doc = yaml.safe_load(suite.read_text())
    changed = False
    for case in doc.get("cases", []):
        for v in case.get("variants", []):
            if isinstance(v, dict) and v.get("ledger"):
                ledger = v["ledger"] if isinstance(v["ledger"], dict) else {}
                v["ledger"] = {**ledger, "repeats": "every"}
                changed = True
    if not changed:
        return suite
    copy = suite.with_name(f"probe_{suite.stem}.yaml")
    copy.write_text(yaml.safe_dump(doc, sort_keys=False))
    return copy


def timed(cmd: list[str], env: dict[str, str], log: Path) -> float:
    """Run ``cmd``, its output to ``log``; its wall seconds."""
    started = time.perf_counter()
    with log.open("w") as out:
        subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, check=False)
    return time.perf_counter() - started


def measure(suite: Path, out: Path, plain: bool, extra: list[tuple[str, dict[str, str]]]) -> None:
    """ncu's run, the probe's run (and a plain harness run, and extra probe runs) of ``suite``."""
    copy = probe_copy(suite)
    out.mkdir(parents=True, exist_ok=True)
    walls: dict[str, float] = {}
    env = dict(os.environ)
    py = sys.executable
    try:
        walls["ncu_run"] = timed(
            [py, "-m", "fuseci", "run", str(copy), "--report-dir", str(out / "ncu"), "-q"], env, out / "ncu_run.log"
        )
        for label, more in [("cupti", {}), *extra]:
            (out / f"{label}.jsonl").unlink(missing_ok=True)
            walls[label] = timed(
                [py, "-m", "fuseci.harness", str(copy), "--record", str(out / f"{label}.record.json")],
                {**env, "FUSECI_CUPTI_PROBE": str(out / f"{label}.jsonl"), **more},
                out / f"{label}.log",
            )
        if plain:
            walls["plain"] = timed(
                [py, "-m", "fuseci.harness", str(copy), "--record", str(out / "plain.record.json")],
                env,
                out / "plain.log",
            )
    finally:
        if copy != suite:
            copy.unlink()
    (out / "walls.json").write_text(json.dumps(walls, indent=1))


def ncu_kernels(report: Path) -> dict[str, list[dict[str, Any]]]:
    """Each ``fuseci:`` range's kernels in launch order: mangled and plain names, metrics."""
    from fuseci.frames.report import load_reader

    ncu_report = load_reader()
    ctx = ncu_report.load_report(str(report))
    out: dict[str, list[dict[str, Any]]] = {}
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            state = action.nvtx_state()
            name = None
            for d in state.domains():
                for pushed in state.domain_by_id(d).push_pop_ranges():
                    if pushed.startswith("fuseci:"):
                        name = pushed
            if name is None:
                continue
            metrics: dict[str, float] = {}
            for m in (*EXACT, *NEAR, *SHAPE, "profiler__replayer_passes"):
                metric = action.metric_by_name(m)
                if metric is not None:
                    metrics[m] = metric.as_double()
            try:
                mangled = action.name(ncu_report.IAction.NameBase_MANGLED)
            except Exception:
                mangled = action.name()
            out.setdefault(name, []).append({"name": action.name(), "mangled": mangled, "metrics": metrics})
    return out


def probe_lines(path: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The probe's header line and its windows by range name."""
    head: dict[str, Any] = {}
    windows: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return {"error": f"{path} not written"}, windows
    for line in path.read_text().splitlines():
        doc = json.loads(line)
        if "range" in doc:
            windows[doc["range"]] = doc
        else:
            head.update(doc)
    return head, windows


def tally(
    exact: dict[str, list[int]],
    misses: list[dict[str, Any]],
    where: dict[str, str],
    metric: str,
    ours: Any,
    theirs: Any,
) -> None:
    """One kernel's ``metric`` as ncu (``theirs``) and the probe (``ours``) saw it: counted in
    ``exact`` (identical, compared), and a miss said with ``where`` (its range and kernel)."""
    exact[metric][1] += 1
    if ours == theirs:
        exact[metric][0] += 1
    else:
        misses.append({**where, "metric": metric, "ncu": theirs, "probe": ours})


def compare(out: Path, label: str = "cupti") -> dict[str, Any]:
    """The probe's windows against ncu's kernels, metric by metric."""
    reports = sorted((out / "ncu").glob("*.ncu-rep"))
    head, windows = probe_lines(out / f"{label}.jsonl")
    result: dict[str, Any] = {"head": head, "walls": json.loads((out / "walls.json").read_text())}
    if not reports:
        result["error"] = "ncu wrote no report"
        return result
    ncu = ncu_kernels(reports[0])
    exact = {m: [0, 0] for m in (*EXACT, *SHAPE, "name")}
    near: dict[str, list[float]] = {m: [] for m in NEAR}
    misses: list[dict[str, Any]] = []
    counts = {
        "ranges_ncu": len(ncu),
        "ranges_probe": len(windows),
        "kernels_ncu": 0,
        "kernels_probe": 0,
        "unaligned": [],
    }
    cost: list[float] = []
    for name, rows in ncu.items():
        counts["kernels_ncu"] += len(rows)
        w = windows.get(name)
        if w is None:
            counts["unaligned"].append(f"{name}: not in the probe")
            continue
        kernels = w["kernels"]
        launches = [x for x in w["launches"] if x["api"] not in ("cuGraphLaunch", "cuGraphLaunch_ptsz")]
        counts["kernels_probe"] += len(kernels)
        if len(kernels) != len(rows):
            counts["unaligned"].append(
                f"{name}: ncu {len(rows)} kernels, probe {len(kernels)} ranges, {len(launches)} launches"
            )
            continue
        if w.get("seconds_plain") is not None:
            cost.append((w["seconds_call"] + w["seconds_decode"] - w["seconds_plain"]) / max(1, len(rows)))
        for i, (row, (_, values)) in enumerate(zip(rows, kernels, strict=False)):
            launch = launches[i] if len(launches) == len(rows) else None
            same = functools.partial(tally, exact, misses, {"range": name, "kernel": row["name"]})
            for m in EXACT:
                if m in row["metrics"] and m in values:
                    same(m, values[m], row["metrics"][m])
            if launch is not None:
                for m, f in SHAPE.items():
                    if m in row["metrics"]:
                        same(m, launch[f], row["metrics"][m])
                # the callback's symbol is ncu's mangled name (its plain one for an extern "C" kernel)
                ncu_name = launch["name"] if launch["name"] in (row["mangled"], row["name"]) else row["mangled"]
                same("name", launch["name"], ncu_name)
            for m in NEAR:
                a, b = row["metrics"].get(m), values.get(m)
                if a is not None and b is not None and a > 0:
                    near[m].append((b - a) / a)
    result["counts"] = counts
    result["exact"] = exact
    result["near"] = {
        m: {
            "n": len(v),
            "median": sorted(v)[len(v) // 2] if v else None,
            "max_abs": max((abs(x) for x in v), default=None),
        }
        for m, v in near.items()
    }
    result["misses"] = misses[:200]
    result["cost_per_kernel_s"] = sorted(cost)[len(cost) // 2] if cost else None
    result["cost_n"] = len(cost)
    result["passes_ncu"] = sorted(
        {int(r["metrics"].get("profiler__replayer_passes", 0)) for rows in ncu.values() for r in rows}
    )
    return result


def table(results: dict[str, dict[str, Any]]) -> str:
    """One line per suite and probe run."""
    lines = [
        "suite/run            kernels ncu/probe  exact-ok/n (worst metric)        shape+name ok/n  dram_r med/max   time med   passes cupti/ncu  ms/kernel  walls"
    ]
    for key, r in results.items():
        if "counts" not in r:
            lines.append(f"{key:20} {r.get('error') or r.get('head', {}).get('error')}")
            continue
        c = r["counts"]
        ok = sum(v[0] for m, v in r["exact"].items() if m in EXACT)
        n = sum(v[1] for m, v in r["exact"].items() if m in EXACT)
        worst = min((v[0] / v[1], m) for m, v in r["exact"].items() if m in EXACT and v[1]) if n else (math.nan, "")
        sok = sum(v[0] for m, v in r["exact"].items() if m not in EXACT)
        sn = sum(v[1] for m, v in r["exact"].items() if m not in EXACT)
        dr = r["near"]["dram__bytes_read.sum"]
        tm = r["near"]["gpu__time_duration.sum"]
        cost = r["cost_per_kernel_s"]
        walls = " ".join(f"{k}={v:.1f}" for k, v in r["walls"].items())
        lines.append(
            f"{key:20} {c['kernels_ncu']:5}/{c['kernels_probe']:<5} {ok:6}/{n:<6} ({worst[1].split('.')[0][-22:]} {worst[0]:.3f})"
            f"  {sok:5}/{sn:<5}  {fmt(dr['median'])}/{fmt(dr['max_abs'])}  {fmt(tm['median'])}  "
            f"{r['head'].get('passes')}/{r['passes_ncu']}  {cost * 1e3 if cost is not None else float('nan'):7.2f}  {walls}"
            + (f"  unaligned {len(c['unaligned'])}" if c["unaligned"] else "")
        )
    return "\n".join(lines)


def fmt(x: float | None) -> str:
    return "   -  " if x is None else f"{x:+.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suites", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--compare-only", action="store_true")
    parser.add_argument("--plain", action="append", default=[], help="also a plain harness run of this suite stem")
    parser.add_argument(
        "--extra", action="append", default=[], help="LABEL:VAR=VALUE,... another probe run of every suite"
    )
    args = parser.parse_args()
    extra = []
    for spec in args.extra:
        label, _, pairs = spec.partition(":")
        extra.append((label, dict(p.split("=", 1) for p in pairs.split(",") if p)))
    results: dict[str, dict[str, Any]] = {}
    for suite in args.suites:
        out = args.out / suite.stem
        if not args.compare_only:
            measure(suite, out, suite.stem in args.plain, extra)
        for label in ["cupti", *(e[0] for e in extra)]:
            try:
                results[f"{suite.stem}/{label}"] = compare(out, label)
            except Exception as exc:  # a probe: say what broke and go on with the next suite
                results[f"{suite.stem}/{label}"] = {"error": f"{type(exc).__name__}: {exc}"}
            (out / f"compare-{label}.json").write_text(json.dumps(results[f"{suite.stem}/{label}"], indent=1))
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
