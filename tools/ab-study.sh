#!/usr/bin/env bash
# fuseci ab on one GPU (docs/BENCHMARKS.md, "Pull requests: fuseci ab"). Run from the repository
# root on a GPU machine with fuseci installed (it installs from .whl/ first when that exists):
#
#   N=3 bash tools/ab-study.sh
#
#   1. a planted regression (the fused scale_relu_add of kernels/elementwise.py split in two, as
#      kernels.mutants:scale_relu_add_defused does) fails `fuseci ab BASE` with exit 1 for the
#      right reason, and only the elementwise suite is measured (the others: unchanged);
#   2. cost: `fuseci run suites/elementwise.yaml` vs `fuseci ab BASE` where only
#      kernels/elementwise.py changed: (a) the body of one kernel function (a local variable of
#      scale_relu_add_fused renamed: same result, same speed; only its case is measured), and
#      (b) a module-level change (a new constant: every elementwise case is measured); and a
#      full `fuseci run` vs `fuseci ab HEAD HEAD --all`;
#   3. A/A: `fuseci ab HEAD HEAD --all` N times (default 3), each must exit 0 (false reds counted).
# Works in a fresh git repository made from this tree's suites, kernels and baselines (the
# machine's copy may have no history). Packs logs and JSON results into $OUT/r.tar when $OUT is
# set (else into /tmp/ab/r.tar); a table last.
set -u
export PYTHONUNBUFFERED=1
N=${N:-3}
R=/tmp/ab; rm -rf $R; mkdir -p $R/pack
SRC=$PWD
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-build-isolation --find-links .whl -e . > $R/pack/install.log 2>&1 || { cat $R/pack/install.log; exit 1; }
fi
command -v git > /dev/null || { echo "git is not installed: fuseci ab needs it"; exit 1; }
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$GPU"
export TORCHINDUCTOR_CACHE_DIR=$R/cc/inductor TRITON_CACHE_DIR=$R/cc/triton  # one warm cache, as in CI
T0=$(date +%s)
say() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
G() { git -c user.name=ab -c user.email=ab@example.com "$@"; }
now() { date +%s.%N; }
dt() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }

W=$R/repo; mkdir -p $W
cp -r "$SRC/suites" "$SRC/kernels" "$SRC/baselines" $W/
find $W -name __pycache__ -prune -exec rm -rf {} +
cd $W
G init -q -b main && G add -A && G commit -qm base && BASE=$(git rev-parse HEAD)
say "repository at $W, base ${BASE:0:7}"

# warm the compile caches (PyTorch suites), then the plain run's times
timeout 180 fuseci run suites/pytorch.yaml --report-dir $R/warm > $R/pack/warm.log 2>&1; say "warm-up rc=$?"
t0=$(now); timeout 240 fuseci run --report-dir $R/run-all --json $R/pack/run-all.json > $R/pack/run-all.log 2>&1; RC_RUN_ALL=$?; T_RUN_ALL=$(dt $t0 $(now))
say "fuseci run (all) rc=$RC_RUN_ALL ${T_RUN_ALL} s"
t0=$(now); timeout 120 fuseci run suites/elementwise.yaml --report-dir $R/run-1 > $R/pack/run-1.log 2>&1; RC_RUN_1=$?; T_RUN_1=$(dt $t0 $(now))
say "fuseci run elementwise rc=$RC_RUN_1 ${T_RUN_1} s"

# 1. the planted regression, in the working tree (as a pull request's merge commit is)
cat >> kernels/elementwise.py <<'EOF'


def scale_relu_add_fused(x: cp.ndarray, y: cp.ndarray, alpha: float) -> cp.ndarray:  # planted: split in two
    from kernels.mutants import scale_relu_add_defused

    return scale_relu_add_defused(x, y, alpha)
EOF
timeout 240 fuseci ab $BASE --report-dir $R/planted --json $R/pack/planted.json --markdown $R/pack/planted.md > $R/pack/planted.log 2>&1; RC_PLANTED=$?
say "planted split: fuseci ab rc=$RC_PLANTED (expect 1)"
REASON=$(python3 - $R/pack/planted.json <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
bad = sorted({f"{s['suite']}/{c['case']}/{k['variant']} {k['check']}[{k['quantity']}]" for s in doc["suites"] for c in s["cases"] for k in c["checks"] if k["verdict"] in ("regressed", "wrong", "error")})
measured = [s["suite"] for s in doc["suites"] if s["env"]]
skipped = [s["suite"] for s in doc["suites"] if any(k["message"].startswith("unchanged, not measured") for c in s["cases"] for k in c["checks"])]
split = any("fusion split" in k["message"] for s in doc["suites"] for c in s["cases"] for k in c["checks"])
ok = measured == ["elementwise"] and all(b.startswith("elementwise/scale_relu_add/fused") for b in bad) and split and bad
print(f"{'RIGHT' if ok else 'WRONG'} reason; measured {measured}; skipped {skipped}; failing {bad}")
EOF
)
say "$REASON"
git checkout -q -- kernels/elementwise.py

# 2. cost of a pull request that changes one kernel module: (a) one kernel function's body
measured_cases() {  # "N of M" from an ab JSON: of the cases of the suites measured, those measured
  python3 - "$1" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
cases = [c for s in doc["suites"] if s["env"] for c in s["cases"]]
kept = [c for c in cases if any(k["message"].startswith("unchanged, not measured") for k in c["checks"])]
print(f"{len(cases) - len(kept)} of {len(cases)}")
EOF
}
python3 - kernels/elementwise.py <<'EOF'
import sys
path = sys.argv[1]
text = open(path).read()
old = "    (out,) = _SCALE_RELU_ADD(size=x.size, x=x, y=y, alpha=alpha)\n    return out.reshape(x.shape)\n"
assert text.count(old) == 1, "scale_relu_add_fused is not as the study expects"
open(path, "w").write(text.replace(old, old.replace("out", "result")))
EOF
t0=$(now); timeout 240 fuseci ab $BASE --report-dir $R/ab-1 --json $R/pack/ab-1.json > $R/pack/ab-1.log 2>&1; RC_AB_1=$?; T_AB_1=$(dt $t0 $(now))
CASES_AB_1=$(measured_cases $R/pack/ab-1.json)
say "fuseci ab (scale_relu_add_fused changed) rc=$RC_AB_1 ${T_AB_1} s, measured $CASES_AB_1 cases"
git checkout -q -- kernels/elementwise.py
# (b) module-level code, which runs for every case
sed -i 's/^import math$/import math\n\n_STUDY_CONSTANT = 1/' kernels/elementwise.py
grep -q '^_STUDY_CONSTANT = 1$' kernels/elementwise.py || { echo "kernels/elementwise.py has no 'import math' line"; exit 1; }
t0=$(now); timeout 240 fuseci ab $BASE --report-dir $R/ab-m --json $R/pack/ab-m.json > $R/pack/ab-m.log 2>&1; RC_AB_M=$?; T_AB_M=$(dt $t0 $(now))
CASES_AB_M=$(measured_cases $R/pack/ab-m.json)
say "fuseci ab (module-level constant added) rc=$RC_AB_M ${T_AB_M} s, measured $CASES_AB_M cases"
git checkout -q -- kernels/elementwise.py

# 3. A/A, N times: every one must pass; the first times the full ab
AA_RCS=""; AA_TIMES=""; FALSE_RED=0
for i in $(seq 1 $N); do
  t0=$(now); timeout 420 fuseci ab HEAD HEAD --all --report-dir $R/aa-$i --json $R/pack/aa-$i.json > $R/pack/aa-$i.log 2>&1; rc=$?; t=$(dt $t0 $(now))
  AA_RCS="$AA_RCS $rc"; AA_TIMES="$AA_TIMES $t"; [ $rc -ne 0 ] && FALSE_RED=$((FALSE_RED + 1))
  say "A/A $i: rc=$rc ${t} s"
  grep -E "REGRESSED|WRONG|ERROR" $R/pack/aa-$i.log | head -5
done
git worktree list > $R/pack/worktrees-after.txt
LEFT=$(($(wc -l < $R/pack/worktrees-after.txt) - 1))
cp $R/*/*.log $R/pack/ 2>/dev/null
tar cf "${OUT:-$R}/r.tar" -C $R pack

python3 - "$GPU" "$T_RUN_1" "$T_AB_1" "$T_RUN_ALL" "$AA_TIMES" "$RC_PLANTED" "$RC_AB_1" "$AA_RCS" "$FALSE_RED" "$N" "$LEFT" "$RC_RUN_ALL" "$RC_RUN_1" "$T_AB_M" "$RC_AB_M" "$CASES_AB_1" "$CASES_AB_M" <<'EOF'
import statistics, sys
gpu, run1, ab1, runall, aa, planted, rcab1, aarcs, red, n, left, rcrunall, rcrun1, abm, rcabm, cases1, casesm = sys.argv[1:]
run1, ab1, runall, abm = float(run1), float(ab1), float(runall), float(abm)
aa_t = [float(t) for t in aa.split()]
aa_med = statistics.median(aa_t)
print(f"\n{gpu}")
print(f"| what | time | ratio | limit | rc |")
print(f"|---|---|---|---|---|")
print(f"| fuseci run suites/elementwise.yaml | {run1:.1f} s | | | {rcrun1} |")
print(f"| fuseci ab BASE, one function of kernels/elementwise.py changed ({cases1} cases measured) | {ab1:.1f} s | {ab1 / run1:.2f}x | 1.5x | {rcab1} |")
print(f"| fuseci ab BASE, module-level code of kernels/elementwise.py changed ({casesm} cases measured) | {abm:.1f} s | {abm / run1:.2f}x | | {rcabm} |")
print(f"| fuseci run (all default suites) | {runall:.1f} s | | | {rcrunall} |")
print(f"| fuseci ab HEAD HEAD --all (median of {len(aa_t)}: {', '.join(f'{t:.1f}' for t in aa_t)}) | {aa_med:.1f} s | {aa_med / runall:.2f}x | 2.2x | {aarcs.strip()} |")
print(f"| planted split: fuseci ab BASE | | | exit 1 | {planted} |")
print(f"A/A false reds: {red} of {n}; worktrees left behind: {left}")
EOF
