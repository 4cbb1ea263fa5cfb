"""What a fusion ledger costs as a model's kernel count grows, with and without `repeats: once`.

    python3 tools/ledger_depth.py --out DIR [--depths 1,4,8] [--repeats once,every] [--per-block]

For each depth and each `repeats` mode, writes a one-case suite (a stack of `depth` pre-norm
blocks: `kernels.models:stack_eager` against `stack_compiled`, or `stack_blocks_compiled` with
`--per-block`, the compiled one with a ledger) and times `fuseci run` on it, after an untimed
warm-up run of each depth (`--no-warmup`: none). Prints a Markdown table (depth, mode, launches,
profiled, seconds) and the cost of one more profiled kernel, also written to DIR/summary.md.
Exit status: 0 when every run's verdict was given, 1 when a run failed, 3 when the arguments
are wrong.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from fuseci.store.results import read_results

SUITE = """\
# {depth} pre-norm blocks in bf16, compiled {how}, the compiled forward audited by its ledger.
suite: {name}
defaults:
  framework: torch
  dtype: bfloat16
  correctness: {{rtol: 0.1, atol: 0.5}}   # up to sixteen bf16 blocks deep against float64
  bytes_allowance: "off"
cases:
  - id: stack
    inputs:
      x: {{shape: [4, 512, 1024]}}
    params: {{depth: {depth}}}
    reference: kernels.models:stack_reference
    variants:
      unfused: kernels.models:stack_eager
      compiled:
        fn: kernels.models:{fn}
        ledger: {{repeats: {repeats}}}
"""


def _ints(text: str) -> list[int]:
    values = [int(x) for x in text.split(",") if x.strip()]
    if not values or any(v < 1 or v > 64 for v in values):
        raise ValueError("depths are whole numbers from 1 to 64")
    return values


def _one(out: Path, depth: int, repeats: str, per_block: bool) -> dict[str, object]:
    name = f"depth{depth}-{repeats}"
    suite = out / "suites" / f"{name}.yaml"
    suite.parent.mkdir(parents=True, exist_ok=True)
    fn = "stack_blocks_compiled" if per_block else "stack_compiled"
    how = "block by block" if per_block else "as one graph"
    suite.write_text(SUITE.format(depth=depth, name=name, fn=fn, how=how, repeats=repeats))
    result = out / "results" / f"{name}.json"
    argv = [sys.executable, "-m", "fuseci", "run", str(suite), "--baselines", str(out / "none"),
            "--report-dir", str(out / "reports"), "--json", str(result)]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    (out / "logs").mkdir(exist_ok=True)
    (out / "logs" / f"{name}.log").write_text(proc.stdout + proc.stderr)
    row: dict[str, object] = {"depth": depth, "repeats": repeats, "exit": proc.returncode, "seconds": seconds}
    if proc.returncode in (0, 1) and result.exists():
        variants = {v.variant: v for v in read_results(result)[0].cases[0].variants}
        row["launches"] = int(variants["compiled"].values["launches"])
        from fuseci.frames import report as reader

        frame = reader.read_report(out / "reports" / f"{name}.ncu-rep")  # repeats not counted back in
        row["profiled"] = int((frame["variant"] == "compiled").sum())
    return row


def _slope(rows: list[dict[str, object]]) -> float | None:
    """Seconds per profiled kernel: the least-squares slope within each depth, pooled over the depths."""
    by_depth: dict[object, list[tuple[float, float]]] = {}
    for r in rows:
        if "profiled" in r:
            by_depth.setdefault(r.get("depth"), []).append((float(r["profiled"]), float(r["seconds"])))  # type: ignore[arg-type]
    sxy = sxx = 0.0
    for points in by_depth.values():
        mx = sum(x for x, _ in points) / len(points)
        my = sum(y for _, y in points) / len(points)
        sxy += sum((x - mx) * (y - my) for x, y in points)
        sxx += sum((x - mx) ** 2 for x, _ in points)
    return sxy / sxx if sxx else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--depths", default="1,4,8")
    parser.add_argument("--repeats", default="once,every")
    parser.add_argument("--per-block", action="store_true")
    parser.add_argument("--no-warmup", action="store_true", help="time the first run too (cold compile caches)")
    args = parser.parse_args(argv)
    try:
        depths = _ints(args.depths)
    except ValueError as exc:
        print(f"ledger_depth: --depths {args.depths!r}: {exc}", file=sys.stderr)
        return 3
    modes = [m for m in args.repeats.split(",") if m]
    if not modes or any(m not in ("once", "every") for m in modes):
        print(f"ledger_depth: --repeats {args.repeats!r}: give once, every or both", file=sys.stderr)
        return 3
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.no_warmup:  # each depth's kernels in the compile caches, as a CI runner keeps them: not timed
        for depth in depths:
            _one(args.out, depth, modes[0], args.per_block)
    rows = [_one(args.out, d, m, args.per_block) for d in depths for m in modes]
    lines = ["| depth | repeats | launches | profiled | seconds | exit |", "| ---: | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(
            f"| {r['depth']} | {r['repeats']} | {r.get('launches', '-')} | {r.get('profiled', '-')} "
            f"| {float(r['seconds']):.1f} | {r['exit']} |"  # type: ignore[arg-type]
        )
    slope = _slope(rows)
    lines.append("")
    lines.append(
        f"cost of one more profiled kernel: {slope:.3f} s"
        if slope is not None
        else "cost: too few points (give both repeats modes)"
    )
    text = "\n".join(lines)
    (args.out / "summary.md").write_text(text + "\n")
    print(text)
    return 0 if all(r["exit"] in (0, 1) and "profiled" in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
