#!/usr/bin/env bash
# Record the test fixtures and baselines on a GPU machine, checking the GPU-side acceptance
# steps on the way. Run from the repository root with fuseci installed and ncu on PATH:
#
#   bash tools/record-fixtures.sh WORKDIR [record|timing|all]
#
# record: runs the gpu-marked tests; records the baseline of every suite in suites/, the planted
#   suites included, by profiling it as `update-baselines` does (each variant profiled
#   BASELINE_PASSES times, to learn which counters repeat); profiles every suite again against
#   those baselines as `fuseci run` does (must pass: these reports are the fixtures),
#   re-records (must be unchanged), and profiles a copy of the elementwise suite whose fused
#   scale_relu_add is swapped for the de-fused mutant (must regress).
# timing: alternates three runs of the exact ncu command fuseci builds for the elementwise
#   suite, run by hand, with three `fuseci run`s of it (docs/BENCHMARKS.md), then benchmarks
#   every suite outside ncu with `fuseci bench`.
# Packs reports (xz -9), records, baselines and logs into WORKDIR/fixtures.tar; a table last.
# FUSECI_SUITES="normalization stencil" limits both phases to those suites; FUSECI_GPU_TESTS
# names the gpu test files to run (default: all), FUSECI_SKIP_GPU_TESTS=1 skips them;
# FUSECI_SKIP_RERECORD=1 skips the re-record.
set -u
W=${1:-/tmp/fuseci-fixtures}
# One compile cache for every step, as a CI runner keeps it: the reports then hold the autotuned
# choices the baselines were recorded with (a fresh cache per report directory could pick others).
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$W/compile-cache/inductor}
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$W/compile-cache/triton}
PHASE=${2:-all}
mkdir -p "$W"
BL="$W/baselines"
read -r -a SUITES <<< "${FUSECI_SUITES:-elementwise reduction normalization stencil mutants pytorch pytorch_mutants}"  # override to re-record some
declare -A RC T
ORDER=()

step() {  # step NAME CMD...: run, time, keep exit code and output
  local name=$1; shift
  echo "== $name: $*"
  ORDER+=("$name")
  local t0=$(date +%s.%N)
  "$@" > "$W/$name.out" 2>&1
  RC[$name]=$?
  T[$name]=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)")
  grep -v "^  NEW" "$W/$name.out" | tail -n 40
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
ncu --version | tail -n 1

if [[ $PHASE == record || $PHASE == all ]]; then
  rm -rf "$BL" "$W/record" "$W/clean" "$W/rerecord" "$W/regressed"
  read -r -a GPU_TESTS <<< "${FUSECI_GPU_TESTS:-tests}"  # override to run some gpu tests only
  [[ -z ${FUSECI_SKIP_GPU_TESTS:-} ]] && step gpu_tests python3 -m pytest -q -m gpu -n 0 "${GPU_TESTS[@]}"
  for s in "${SUITES[@]}"; do
    step "record_$s" fuseci update-baselines "suites/$s.yaml" --baselines "$BL" --report-dir "$W/record"
    step "clean_$s" fuseci run "suites/$s.yaml" --baselines "$BL" --report-dir "$W/clean" --json "$W/clean_$s.json"
  done
  FILES=("${SUITES[@]/#/suites/}"); FILES=("${FILES[@]/%/.yaml}")
  [[ -z ${FUSECI_SKIP_RERECORD:-} ]] && step rerecord fuseci update-baselines "${FILES[@]}" --baselines "$BL" --report-dir "$W/rerecord"

  # Planted regression: the fused scale_relu_add replaced by its de-fused mutant.
  [[ " ${SUITES[*]} " == *" elementwise "* ]] && {
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
  }
fi

if [[ ($PHASE == timing || $PHASE == all) && " ${SUITES[*]} " == *" elementwise "* ]]; then
  python3 - "$W/hand" > "$W/hand.argv" <<'PY'
import sys
from pathlib import Path
from fuseci.config.parse import load_suite
from fuseci.measure import profile as ncu
from fuseci.measure.command import SuiteFiles
s = load_suite("suites/elementwise.yaml")
files = SuiteFiles(Path(sys.argv[1]), s.name)
Path(sys.argv[1]).mkdir(parents=True, exist_ok=True)
print("\0".join(ncu.build_command(ncu.find_ncu(), s.path, s.ncu, files)))
PY
  mapfile -d '' -t HAND < <(tr -d '\n' < "$W/hand.argv")
  for i in 1 2 3; do  # alternate, so that drift in the machine's state hits both alike
    step "by_hand_$i" "${HAND[@]}"
    step "fuseci_run_$i" fuseci run suites/elementwise.yaml --baselines "$BL" --report-dir "$W/timed"
  done
fi
if [[ $PHASE == timing || $PHASE == all ]]; then
  FILES=("${SUITES[@]/#/suites/}"); FILES=("${FILES[@]/%/.yaml}")
  step bench fuseci bench "${FILES[@]}" --report-dir "$W/bench" --json "$W/bench.json"
fi

mkdir -p "$W/pack/reports" "$W/pack/logs"
for s in "${SUITES[@]}"; do
  if [[ -f "$W/clean/$s.ncu-rep" ]]; then
    xz -9e -T0 -c "$W/clean/$s.ncu-rep" > "$W/pack/reports/$s.ncu-rep.xz"
    cp "$W/clean/$s.harness.json" "$W/pack/reports/$s.harness.json"
  fi
done
if [[ -f "$W/record/elementwise.ncu-rep" ]]; then  # a baseline's profiled passes, every variant three times
  xz -9 -T0 -c "$W/record/elementwise.ncu-rep" > "$W/pack/reports/elementwise-passes.ncu-rep.xz"
  cp "$W/record/elementwise.harness.json" "$W/pack/reports/elementwise-passes.harness.json"
fi
if [[ -f "$W/regressed/elementwise.ncu-rep" ]]; then
  xz -9 -T0 -c "$W/regressed/elementwise.ncu-rep" > "$W/pack/reports/elementwise-regressed.ncu-rep.xz"
  cp "$W/regressed/elementwise.harness.json" "$W/pack/reports/elementwise-regressed.harness.json"
fi
[[ -d "$BL" ]] && cp -r "$BL" "$W/pack/"
cp "$W"/*.out "$W"/*.xml "$W"/*.json "$W"/*.argv "$W/pack/logs/" 2>/dev/null
cp "$W"/clean/*.log "$W"/record/*.log "$W"/bench/*.log "$W/pack/logs/" 2>/dev/null
cp "$W"/clean/*.timing.json "$W/pack/logs/" 2>/dev/null
tar -C "$W/pack" -cf "$W/fixtures.tar" .
ls -la "$W/pack/reports"

printf '\n%-24s %4s %8s\n' step rc seconds
for s in "${ORDER[@]}"; do
  printf '%-24s %4s %8s\n' "$s" "${RC[$s]:-?}" "${T[$s]:-?}"
done
