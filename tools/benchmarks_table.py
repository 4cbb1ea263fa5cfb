"""Print the per-variant Markdown table of docs/BENCHMARKS.md from a `fuseci bench --json`
file and the recorded reports (ncu's DRAM bytes) of the same card.

    python tools/benchmarks_table.py BENCH_JSON REPORT_DIR [--suffix -h100]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fuseci.config import names
from fuseci.config.parse import load_suite
from fuseci.measure.run import MeasureOptions, measure


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bench_json", type=Path)
    parser.add_argument("report_dir", type=Path)
    parser.add_argument("--suffix", default="")
    args = parser.parse_args()
    bench = json.loads(args.bench_json.read_text())
    print(
        "| suite | case | variant | median µs | % of copy | speedup | ncu DRAM MB | minimum MB | ncu ÷ minimum | DRAM bytes gain |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in bench["suites"]:
        suite = load_suite(f"suites/{s['suite']}.yaml")
        report = args.report_dir / f"{s['suite']}{args.suffix}.ncu-rep.xz"
        results = measure(suite, MeasureOptions(from_report=report))
        for case in s["cases"]:
            for v in case["variants"]:
                values = results.variant_values(case["case"], v["variant"]) or {}
                gains = results.gain_values(case["case"], v["variant"]) or {}
                dram = values.get(names.DRAM_BYTES, float("nan")) / 1e6
                minimum = v["min_bytes"] / 1e6
                fused = v["variant"] != "unfused"
                speedup = f"{v['speedup']:.2f}x" if fused else ""
                efficiency = f"{dram / minimum:.2f}" if fused else ""
                gain = f"{gains[names.DRAM_BYTES]:.2f}x" if fused else ""
                print(
                    f"| {s['suite']} | {case['case']} | {v['variant']} | {v['median_ns'] / 1e3:.1f} | "
                    f"{100 * v['copy_fraction']:.1f} | {speedup} | {dram:.1f} | {minimum:.1f} | {efficiency} | {gain} |"
                )


if __name__ == "__main__":
    main()
