"""ncu's cost per profiled kernel: a stack of pre-norm blocks compiled, its forward measured once
under ncu from inside the process (docs/BENCHMARKS.md, "Profiling cost per kernel").

    ncu --config-file off --nvtx --nvtx-include 'regex:^fuseci:s:.*/' \\
        --nvtx-exclude 'regex:^fuseci-repeat:.*/' --metrics METRICS --cache-control all \\
        python3 tools/ncu_replay_cost.py DEPTH [once|every]

METRICS: ``python3 -c "from fuseci.config import quantities; print(','.join(quantities.ncu_metrics()))"``.
Prints one JSON line: the seconds of the measured call (ncu replays each kernel as it launches,
so this is the profiling cost), the launches and the repeats left out (with ``once``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path

os.environ.setdefault("TORCHINDUCTOR_UNIQUE_KERNEL_NAMES", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from fuseci.harness.arrays import launch_ranges
from kernels.models import Stack


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2) or not argv[0].isdigit() or (len(argv) == 2 and argv[1] not in ("once", "every")):
        print("usage: ncu_replay_cost.py DEPTH [once|every]", file=sys.stderr)
        return 3
    depth, once = int(argv[0]), len(argv) == 2 and argv[1] == "once"
    torch.manual_seed(0)
    model = Stack(depth).to("cuda", torch.bfloat16).eval()
    x = torch.randn(4, 512, 1024, device="cuda", dtype=torch.bfloat16)
    compiled = torch.compile(model)
    with torch.no_grad():
        compiled(x)
        compiled(x)
        torch.cuda.synchronize()
        marks = launch_ranges.once_per_configuration() if once else nullcontext(None)
        torch.cuda.nvtx.range_push("fuseci:s:c:v")
        start = time.perf_counter()
        with torch.autograd.profiler.emit_nvtx(), marks as launches:
            compiled(x)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        torch.cuda.nvtx.range_pop()
    out = {"depth": depth, "repeats": "once" if once else "every", "measured_s": round(seconds, 3)}
    if launches is not None:
        out.update(launches=launches.launches, left_out=len(launches.repeats))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
