"""Which ncu counters see every byte the SMs ask of memory, what they cost in replay passes, and
which of them repeat (docs/BENCHMARKS.md, "Counters that see TMA" and "Which counters repeat").

Run on a GPU machine from the repository root, with fuseci's dependencies installed, CuPy,
PyTorch and Triton, and ncu on PATH::

    python3 tools/counter_study.py WORKDIR

Queries the device's counters (``WORKDIR/metrics.txt``), profiles candidate metric sets for their
replay passes and real kernels for every candidate counter's values (each launched twice in each
of two processes), and checks that each edit of ``kernels/edits.py`` computes what its healthy
kernel computes. Everything goes to ``WORKDIR/study.json``; tables are printed last.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: What the names of counters worth a look contain.
CANDIDATE_WORDS = ("tma", "xbar2l1tex", "l1tex2xbar", "lsu_mem_global", "srcunit_tex_op", "lts__t_requests_srcunit_tex")
XBAR_READ = "l1tex__m_xbar2l1tex_read_bytes.sum"
XBAR_WRITE = "l1tex__m_l1tex2xbar_write_bytes.sum"
LSU_LD = "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum"
LSU_ST = "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum"
L2_READ = "lts__t_sectors_srcunit_tex_op_read.sum"
L2_WRITE = "lts__t_sectors_srcunit_tex_op_write.sum"
INST = "smsp__inst_executed.sum"
LDGSTS = "l1tex__t_bytes_pipe_lsu_mem_global_op_ldgsts_cache_access.sum"
XBAR_READ_LSU = "l1tex__m_xbar2l1tex_read_bytes_pipe_lsu.sum"
TMA_READ = "l1tex__m_xbar2l1tex_read_bytes_pipe_tma.sum"
TMA_WRITE = "l1tex__m_l1tex2xbar_write_bytes_mem_global_op_tma_st.sum"
PASSES = "profiler__replayer_passes"
SHAPE = ("launch__registers_per_thread", "launch__grid_size", "launch__block_size")


# --- the profiled application -------------------------------------------------------------------


def app(items: list[str]) -> None:
    """Run each item twice, each launch in an NVTX range ``study:<item>:<n>``; check the edits."""
    import cupy as cp

    def ranged(name: str, call) -> None:
        call()  # warm-up outside the ranges: compilation, autotuning, library handles
        cp.cuda.Device().synchronize()
        for n in (0, 1):
            cp.cuda.nvtx.RangePush(f"study:{name}:{n}")
            call()
            cp.cuda.Device().synchronize()
            cp.cuda.nvtx.RangePop()

    if "small" in items:
        from kernels.elementwise import scale_relu_add_fused

        x = cp.random.standard_normal(1 << 22, dtype=cp.float32)
        ranged("small", lambda: scale_relu_add_fused(x, x, 0.5))
        return
    same: dict[str, bool] = {}
    from kernels import edits
    from kernels.elementwise import bias_gelu_fused, scale_relu_add_fused

    x = cp.random.standard_normal(1 << 26, dtype=cp.float32)
    y = cp.random.standard_normal(1 << 26, dtype=cp.float32)
    ranged("elementwise", lambda: scale_relu_add_fused(x, y, 0.75))
    xg = cp.random.standard_normal((16384, 4096), dtype=cp.float32)
    bg = cp.random.standard_normal(4096, dtype=cp.float32)
    healthy = bias_gelu_fused(xg, bg)
    ranged("cuda", lambda: bias_gelu_fused(xg, bg))
    for edit in edits.CUDA_EDITS:
        fn = edits.edited(edit.name, "bias_gelu_fused")
        same[edit.name] = bool(cp.array_equal(fn(xg, bg), healthy))
        ranged(edit.name, lambda fn=fn: fn(xg, bg))
    import torch
    import torch.nn.functional as F

    from kernels.pytorch import bias_gelu_residual_compiled, bias_gelu_residual_triton

    torch.manual_seed(0)
    xt = torch.randn(16384, 8192, device="cuda", dtype=torch.bfloat16)
    bt = torch.randn(8192, device="cuda", dtype=torch.bfloat16)
    rt = torch.randn(16384, 8192, device="cuda", dtype=torch.bfloat16)
    good = bias_gelu_residual_triton(xt, bt, rt)
    ranged("triton", lambda: bias_gelu_residual_triton(xt, bt, rt))
    for edit in edits.TRITON_EDITS:
        fn = edits.edited(edit.name, "bias_gelu_residual_triton")
        same[edit.name] = bool(torch.equal(fn(xt, bt, rt), good))
        ranged(edit.name, lambda fn=fn: fn(xt, bt, rt))
    ranged("inductor", lambda: bias_gelu_residual_compiled(xt, bt, rt))
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(8192, device="cuda", dtype=torch.bfloat16)
    ranged("gemm", lambda: a @ b)
    epilogue = torch.compile(lambda a, b, bias: F.gelu(a @ b + bias, approximate="tanh"), dynamic=False)
    ranged("gemm_epilogue", lambda: epilogue(a, b, bias))
    q, k, v = (torch.randn(8, 16, 4096, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    ranged("sdpa", lambda: F.scaled_dot_product_attention(q, k, v))
    ranged("sdpa_causal", lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    Path(os.environ["STUDY_SAME"]).write_text(json.dumps(same))


# --- the driver ---------------------------------------------------------------------------------


def profile(work: Path, label: str, metrics: list[str], item: str) -> list[dict]:
    """Profile the app's ``item`` with ``metrics``; one row per kernel: range, name, values."""
    import ncu_report

    report = work / f"{label}.ncu-rep"
    env = {**os.environ, "STUDY_SAME": str(work / "same.json"), "TORCHINDUCTOR_CACHE_DIR": str(work / "inductor")}
    argv = [
        "ncu", "--config-file", "off", "--nvtx", "--nvtx-include", "regex:^study:.*/",
        "--metrics", ",".join(dict.fromkeys([*metrics, PASSES, *SHAPE])),
        "--clock-control", "none", "--cache-control", "all", "--replay-mode", "kernel",
        "--export", str(report), "--force-overwrite", "--log-file", str(work / f"{label}.ncu.log"),
        sys.executable, __file__, "--app", item,
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, cwd=ROOT)
    took = time.perf_counter() - started
    if done.returncode != 0 or not report.exists():
        print(f"{label}: ncu exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}", flush=True)
        return []
    ctx = ncu_report.load_report(str(report))
    rows = []
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for j in range(rng.num_actions()):
            action = rng.action_by_idx(j)
            stack = []
            state = action.nvtx_state()
            for d in state.domains():
                stack += list(state.domain_by_id(d).push_pop_ranges())
            where = next((s for s in stack if s.startswith("study:")), "?")
            values = {}
            for m in dict.fromkeys([*metrics, PASSES, *SHAPE]):
                metric = action.metric_by_name(m)
                values[m] = None if metric is None else metric.as_double()
            rows.append({"range": where, "kernel": action.name(), "values": values})
    print(f"{label}: {len(rows)} kernels in {took:.1f} s", flush=True)
    return rows


def candidate_metrics(work: Path) -> list[str]:
    """Counters of the device whose names hold one of :data:`CANDIDATE_WORDS` (as ``.sum``)."""
    done = subprocess.run(["ncu", "--query-metrics", "--devices", "0"], capture_output=True, text=True, check=False)
    (work / "metrics.txt").write_text(done.stdout + done.stderr)
    names = []
    for line in done.stdout.splitlines():
        m = re.match(r"^(\S+__\S+)\s", line)
        if m and any(w in m.group(1) for w in CANDIDATE_WORDS):
            names.append(m.group(1))
    return names


def main(work: Path) -> None:
    from fuseci.config import quantities

    work.mkdir(parents=True, exist_ok=True)
    base = list(quantities.ncu_metrics())
    found = candidate_metrics(work)
    print(f"{len(found)} counters of interest on this device (WORKDIR/metrics.txt)", flush=True)
    less = [m for m in base if m not in (LSU_LD, LSU_ST)]
    sets: dict[str, list[str]] = {
        "fuseci": base,
        "+xbar_read": [*base, XBAR_READ],
        "+xbar_write": [*base, XBAR_WRITE],
        "+xbar_read+xbar_write": [*base, XBAR_READ, XBAR_WRITE],
        "lsu->xbar": [*less, XBAR_READ, XBAR_WRITE],
        "-lsu_ld+xbar_read": [m for m in base if m != LSU_LD] + [XBAR_READ],
        "-inst+xbar_read": [m for m in base if m != INST] + [XBAR_READ],
        "-l2read+xbar_read": [m for m in base if m != L2_READ] + [XBAR_READ],
        "-l2read-l2write+xbar_rw": [m for m in base if m not in (L2_READ, L2_WRITE)] + [XBAR_READ, XBAR_WRITE],
        "-inst-l2read+xbar_rw": [m for m in base if m not in (INST, L2_READ)] + [XBAR_READ, XBAR_WRITE],
        "+tma_read": [*base, TMA_READ],
        "+tma_read+tma_write": [*base, TMA_READ, TMA_WRITE],
        "+ldgsts": [*base, LDGSTS],
        "+xbar_read_lsu": [*base, XBAR_READ_LSU],
        "-l2read+tma_read+xbar_write": [m for m in base if m != L2_READ] + [TMA_READ, XBAR_WRITE],
    }
    passes: dict[str, float | None] = {}
    for label, metrics in sets.items():
        rows = profile(work, "passes-" + re.sub(r"[^A-Za-z0-9]+", "_", label), metrics, "small")
        passes[label] = max((r["values"][PASSES] or 0 for r in rows), default=None)
        print(f"  {passes[label]!s:>5} replay passes: {label}", flush=True)
    wide = list(dict.fromkeys([LSU_LD, LSU_ST, LDGSTS, XBAR_READ, XBAR_READ_LSU, TMA_READ, XBAR_WRITE, TMA_WRITE,
                               L2_READ, L2_WRITE, INST, "dram__bytes_read.sum", "gpu__time_duration.sum"]))  # fmt: skip
    runs = [profile(work, f"values-{n}", wide, "all") for n in (1, 2)]
    same = json.loads((work / "same.json").read_text()) if (work / "same.json").exists() else {}
    (work / "study.json").write_text(
        json.dumps({"candidates": found, "passes": passes, "wide": wide, "runs": runs, "same": same}, indent=1)
    )
    print("\nreplay passes per metric set (one small elementwise kernel):")
    for label, p in passes.items():
        print(f"  {p!s:>5}  {label}")
    print("\nedits computing the healthy kernel's outputs bit for bit:", same)
    summarize(runs, wide)


def summarize(runs: list[list[dict]], wide: list[str]) -> None:
    """Per kernel: registers, and for each counter its value and spread over the four launches."""
    launches: dict[tuple[str, str], list[dict]] = {}
    for rows in runs:
        for r in rows:
            item = r["range"].split(":")[1] if ":" in r["range"] else "?"
            launches.setdefault((item, r["kernel"][:60]), []).append(r["values"])
    print("\nper kernel: registers; per counter the first launch's value, and max-min over its launches")
    for (item, kernel), vals in launches.items():
        regs = sorted({v.get("launch__registers_per_thread") for v in vals})
        parts = []
        for m in wide:
            xs = [v.get(m) for v in vals if v.get(m) is not None]
            if not xs:
                continue
            spread = max(xs) - min(xs)
            short = m.split("__", 1)[1][:28]
            parts.append(
                f"{short}={xs[0]:.0f}" + (f" (±{spread:.0f}, {spread / xs[0]:.2%})" if spread and xs[0] else "")
            )
        print(f"- {item} {kernel} n={len(vals)} regs={regs}: " + "; ".join(parts))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--app"]:
        app(sys.argv[2:])
    else:
        main(Path(sys.argv[1]))
