#!/usr/bin/env bash
# A/A of a ledger suite (docs/BENCHMARKS.md, "The fusion ledger: model suites"): N runs of
# `fuseci run SUITE` against the stored baselines and ledgers, the first alone (it warms the
# compile caches), the rest C at once (the GPU turn protocol serialises their profiled and timed
# passes); every run keeps its JSON results and log in WORKDIR. Prints one line per run as it
# ends, then each run's exit and the checks that did not pass. Run from the repository root on
# a GPU machine with fuseci installed:
#
#   bash tools/ledger-aa.sh [N] [C] [WORKDIR] [SUITE]
#
# The compile caches are shared through TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR in WORKDIR.
# With AA_BASELINES=fresh the baselines are first recorded into WORKDIR/baselines by
# `fuseci update-baselines` through the same caches, and the runs judged against them: noise
# alone, without a stored baseline's autotuning choices (a cold cache may choose another launch
# shape, whose bytes differ: docs/BENCHMARKS.md, "The fusion ledger: model suites").
# With AA_CACHES=each every run (and update-baselines) compiles with cold caches of its own, under
# its report directory, as a fresh runner does: each run then tests that the baseline's kept
# autotuning choices are put in place (the run's log says how many; printed below).
set -u
N=${1:-10}; C=${2:-1}; W=${3:-/tmp/fuseci-ledger-aa}; SUITE=${4:-suites/models.yaml}
mkdir -p "$W"
if [ "${AA_CACHES:-shared}" = each ]; then
  unset TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR
else
  export TORCHINDUCTOR_CACHE_DIR=$W/cc/inductor TRITON_CACHE_DIR=$W/cc/triton
fi
BASE=()
if [ "${AA_BASELINES:-stored}" = fresh ]; then
  BASE=(--baselines "$W/baselines")
  fuseci update-baselines "$SUITE" "${BASE[@]}" --report-dir "$W/b" > "$W/baselines.log" 2>&1 || {
    echo "update-baselines failed: $W/baselines.log"; exit 3; }
  echo "baselines recorded in $W/baselines"
fi
one() {
  local s e rc
  s=$(date +%s.%N)
  fuseci run "$SUITE" "${BASE[@]}" --report-dir "$W/r$1" --json "$W/r$1.json" > "$W/r$1.log" 2>&1; rc=$?
  e=$(date +%s.%N)
  echo "run $1 rc=$rc wall=$(python3 -c "print(round($e-$s,1))") $(grep -E '^fuseci: [0-9]+ variant' "$W/r$1.log" | tail -1)"
}
s0=$(date +%s)
one 1
i=2
while [ "$i" -le "$N" ]; do
  for j in $(seq "$i" $(( i + C - 1 ))); do [ "$j" -le "$N" ] && one "$j" & done; wait
  i=$(( i + C ))
done
echo "A/A: $N runs in $(( $(date +%s) - s0 )) s"
python3 - "$W" "$N" <<'PY'
import json, sys
w, n = sys.argv[1], int(sys.argv[2])
bad = 0
for i in range(1, n + 1):
    try:
        doc = json.load(open(f"{w}/r{i}.json"))
    except (OSError, ValueError) as exc:
        print(f"run {i}: no results ({exc})")
        bad += 1
        continue
    fails = [
        (c["case"], k.get("variant"), k.get("check"), k.get("quantity"), k.get("verdict"), k.get("message", "")[:160])
        for s in doc["suites"] for c in s["cases"] for k in c.get("checks", []) if k.get("verdict") not in ("pass", "new")
    ]
    checks = sum(len(c.get("checks", [])) for s in doc["suites"] for c in s["cases"])
    print(f"run {i}: exit {doc.get('exit_code')}, {checks} checks, {len(fails)} not passing")
    for s in doc["suites"]:
        for note in s.get("notes", []):
            if "autotuning choice" in note:
                print("    " + note.split(":")[0])
    for f in fails:
        print("   ", f)
    bad += bool(fails)
print(f"runs with a check not passing: {bad} of {n}")
PY
