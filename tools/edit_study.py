"""Planted source edits judged by ``fuseci ab`` against the unedited commit (docs/BENCHMARKS.md,
"Source edits").

Run on a GPU machine from the repository root, with fuseci installed and ncu on PATH::

    python3 tools/edit_study.py WORKDIR [cuda|triton ...]

For each edit of ``kernels/edits.py`` (the CUDA ones, the Triton ones, or both) it edits the
kernel in a fresh git repository (WORKDIR/repo) and runs ``fuseci ab HEAD`` on the suite that
measures it: a planted regression must exit 1 with its bytes REGRESSED, a benign edit exit 0.
Prints a line per edit and a table, and writes everything to WORKDIR/edits.json. Exit status 0
when every edit was judged as it must be.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fuseci.judge.verdict import Verdict  # noqa: E402
from fuseci.store.results import read_results  # noqa: E402
from kernels.edits import CUDA_EDITS, TRITON_EDITS, Edit  # noqa: E402

FAILING = (Verdict.REGRESSED, Verdict.WRONG, Verdict.ERROR)

#: Per kind of edit: the suite file, the case and the variant that runs the edited kernel.
TARGETS = {
    "cuda": ("suites/elementwise.yaml", "bias_gelu", "fused"),
    "triton": ("suites/pytorch.yaml", "bias_gelu_residual", "triton"),
}
BYTES = ("l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum")


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=study", "-c", "user.email=study@example.com", *args], cwd=repo, check=True)


def make_repo(work: Path) -> Path:
    repo = work / "repo"
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    for part in ("suites", "kernels", "baselines"):
        shutil.copytree(ROOT / part, repo / part, ignore=shutil.ignore_patterns("__pycache__"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    return repo


def judge(repo: Path, work: Path, kind: str, edit: Edit) -> dict[str, object]:
    """Apply ``edit`` in the working tree, run ``fuseci ab HEAD`` and restore the file."""
    suite, case, variant = TARGETS[kind]
    path = repo / "kernels" / edit.path.name
    healthy = path.read_text(encoding="utf-8")
    path.write_text(edit.apply(healthy), encoding="utf-8")
    out = work / f"{edit.name}.json"
    argv = ["fuseci", "ab", "HEAD", "--suite", suite, "--report-dir", str(work / "ab"), "--json", str(out), "-q"]
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=repo, capture_output=True, text=True, check=False)
    took = time.perf_counter() - started
    path.write_text(healthy, encoding="utf-8")
    (work / f"{edit.name}.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    row: dict[str, object] = {
        "edit": edit.name,
        "regression": edit.regression,
        "rc": done.returncode,
        "s": round(took, 1),
    }
    if not out.exists():
        row["problem"] = (done.stdout + done.stderr)[-400:]
        return row
    found = [c for s in read_results(out) for c in s.cases if c.case == case]
    if not found:
        row["problem"] = f"case {case} not in the report"
        return row
    checks = [k for k in found[0].checks if k.variant == variant]
    measured = next((v for v in found[0].variants if v.variant == variant), None)
    shape = lambda ks: [(k.name[:40], k.grid, k.block, k.registers) for k in ks]  # noqa: E731
    row.update(
        verdict=min((k.verdict for k in checks), key=lambda v: v.rank).value if checks else "?",
        failing=sorted({f"{k.check.value}:{k.quantity}" for k in checks if k.verdict in FAILING}),
        bytes=[k.message for k in checks if k.quantity in BYTES],
        cause=measured.cause.kind.value if measured and measured.cause else "-",
        base_kernels=shape(measured.baseline_kernels if measured else ()),
        head_kernels=shape(measured.kernels if measured else ()),
    )
    return row


def main(work: Path, kinds: list[str]) -> int:
    work.mkdir(parents=True, exist_ok=True)
    repo = make_repo(work)
    rows = []
    for kind in kinds:
        for edit in CUDA_EDITS if kind == "cuda" else TRITON_EDITS:
            row = judge(repo, work, kind, edit)
            print(json.dumps(row), flush=True)
            rows.append(row)
    (work / "edits.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    bad = 0
    print(f"\n{'edit':16} {'must':7} {'rc':>3} {'verdict':10} {'cause':10} {'s':>6}  registers base -> head; failing")
    for r in rows:
        must = "fail" if r["regression"] else "pass"
        ok = r["rc"] == (1 if r["regression"] else 0) and (
            not r["regression"] or any(b in f for f in r.get("failing", []) for b in BYTES)
        )
        bad += not ok
        regs = f"{[k[3] for k in r.get('base_kernels', [])]} -> {[k[3] for k in r.get('head_kernels', [])]}"
        print(
            f"{r['edit']:16} {must:7} {r['rc']:>3} {r.get('verdict', '?'):10} {r.get('cause', '-'):10} {r['s']:>6}  {regs}; {r.get('failing', r.get('problem'))}{'' if ok else '  <-- WRONG'}"
        )
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit(f"usage: {sys.argv[0]} WORKDIR [cuda|triton ...]")
    sys.exit(main(Path(sys.argv[1]), sys.argv[2:] or ["cuda", "triton"]))
