#!/usr/bin/env bash
# Record the test fixtures and baselines on a GPU machine, and check the GPU-side acceptance
# steps on the way. Run from the repository root with fuseci installed and ncu on PATH:
#
#   bash tools/record-fixtures.sh [WORKDIR]
#
# It runs the gpu-marked tests; profiles suites/elementwise.yaml (no baseline yet), records a
# baseline from that report, profiles again against it (must pass), re-records (must be
# unchanged), profiles a copy of the suite whose fused scale_relu_add is swapped for the
# de-fused mutant (must regress), times the same ncu command by hand, and packs reports
# (xz -9), records, baselines and logs into WORKDIR/fixtures.tar. Prints a table last.
# The by-hand and fuseci timings alternate three times each (docs/BENCHMARKS.md).
set -u
W=${1:-/tmp/fuseci-fixtures}
rm -rf "$W" && mkdir -p "$W"
BL="$W/baselines"
declare -A RC T

step() {  # step NAME CMD...: run, time, keep exit code and output
  local name=$1; shift
  echo "== $name: $*"
  local t0=$(date +%s.%N)
  "$@" > "$W/$name.out" 2>&1
  RC[$name]=$?
  T[$name]=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)")
  tail -n 25 "$W/$name.out"
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
ncu --version | tail -n 1

step gpu_tests python3 -m pytest -q -m gpu tests
step run_new fuseci run suites/elementwise.yaml --baselines "$BL" --report-dir "$W/clean" --json "$W/clean.json"
step record fuseci update-baselines suites/elementwise.yaml --baselines "$BL" --from-report "$W/clean/elementwise.ncu-rep"
step run_pass fuseci run suites/elementwise.yaml --baselines "$BL" --report-dir "$W/pass" --junit "$W/pass.xml" --json "$W/pass.json"
step rerecord fuseci update-baselines suites/elementwise.yaml --baselines "$BL" --report-dir "$W/rerecord"

# The same ncu command fuseci builds, run by hand.
python3 - "$W/hand" > "$W/hand.argv" <<'PY'
import sys
from pathlib import Path
from fuseci import ncu
from fuseci.suite import load_suite
s = load_suite("suites/elementwise.yaml")
files = ncu.ProfileFiles.in_dir(Path(sys.argv[1]), s.name)
Path(sys.argv[1]).mkdir(parents=True, exist_ok=True)
print("\0".join(ncu.build_command(ncu.find_ncu(), s.name, s.path, s.ncu, files)))
PY
mapfile -d '' -t HAND < <(tr -d '\n' < "$W/hand.argv")
for i in 1 2 3; do  # alternate, so that drift in the machine's state hits both alike
  step "by_hand_$i" "${HAND[@]}"
  step "fuseci_run_$i" fuseci run suites/elementwise.yaml --baselines "$BL" --report-dir "$W/timed"
done

# Planted regression: the fused scale_relu_add replaced by its de-fused mutant.
mkdir -p "$W/regressed-suite"
python3 - "$W/regressed-suite/elementwise.yaml" <<'PY'
import sys, yaml
doc = yaml.safe_load(open("suites/elementwise.yaml"))
for case in doc["cases"]:
    if case["id"] == "scale_relu_add":
        case["variants"]["fused"] = "kernels.mutants:scale_relu_add_defused"
yaml.safe_dump(doc, open(sys.argv[1], "w"), sort_keys=False)
PY
step run_regressed fuseci run "$W/regressed-suite/elementwise.yaml" --baselines "$BL" --report-dir "$W/regressed" --junit "$W/regressed.xml"

mkdir -p "$W/pack/reports" "$W/pack/logs"
xz -9 -T0 -c "$W/clean/elementwise.ncu-rep" > "$W/pack/reports/elementwise.ncu-rep.xz"
cp "$W/clean/elementwise.harness.json" "$W/pack/reports/elementwise.harness.json"
xz -9 -T0 -c "$W/regressed/elementwise.ncu-rep" > "$W/pack/reports/elementwise-regressed.ncu-rep.xz"
cp "$W/regressed/elementwise.harness.json" "$W/pack/reports/elementwise-regressed.harness.json"
cp -r "$BL" "$W/pack/baselines"
cp "$W"/*.out "$W"/*.xml "$W"/*.json "$W/hand.argv" "$W/pack/logs/" 2>/dev/null
cp "$W"/clean/*.log "$W"/regressed/*.log "$W/pack/logs/" 2>/dev/null
tar -C "$W/pack" -cf "$W/fixtures.tar" .
ls -la "$W/pack/reports"

printf '\n%-14s %4s %8s\n' step rc seconds
for s in gpu_tests run_new record run_pass rerecord by_hand_1 fuseci_run_1 by_hand_2 fuseci_run_2 by_hand_3 fuseci_run_3 run_regressed; do
  printf '%-14s %4s %8s\n' "$s" "${RC[$s]:-?}" "${T[$s]:-?}"
done
