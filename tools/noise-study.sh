#!/usr/bin/env bash
# Noise study (docs/BENCHMARKS.md): run every suite N times against the committed baselines with
# the default tolerances, keeping each run's JSON results, then re-record the baselines once (must
# print "unchanged"). Run from the repository root on a GPU machine with fuseci installed:
#
#   bash tools/noise-study.sh WORKDIR [N]
#
# Suites alternate within each round, so drift in the machine's state hits every suite alike.
# Summarise with `python tools/noise_table.py WORKDIR/runs/*.json`.
#
# Then the A/A test of `fuseci ab` (the pull-request gate), N times: `fuseci ab HEAD HEAD --all`
# measures every default suite twice from the same commit and must pass; each exit that is not 0
# is a false red, counted at the end (skipped with FUSECI_AB=0, or outside a git checkout).
set -u
W=${1:-/tmp/fuseci-noise}
N=${2:-5}
read -r -a SUITES <<< "${FUSECI_SUITES:-elementwise reduction normalization stencil mutants}"
mkdir -p "$W/runs" "$W/logs"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu --format=csv
printf '%-14s %3s %4s %8s\n' suite run rc seconds | tee "$W/runs.txt"
for i in $(seq 1 "$N"); do
  for s in "${SUITES[@]}"; do
    t0=$(date +%s.%N)
    fuseci run "suites/$s.yaml" --report-dir "$W/out" --json "$W/runs/$s-$i.json" > "$W/logs/$s-$i.out" 2>&1
    rc=$?
    printf '%-14s %3s %4s %8.1f\n' "$s" "$i" "$rc" "$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$(date +%s.%N)")" | tee -a "$W/runs.txt"
    [[ $rc -ne 0 ]] && grep -E "REGRESSED|ERROR|WRONG|error" "$W/logs/$s-$i.out" | head -n 20
  done
done
FILES=("${SUITES[@]/#/suites/}"); FILES=("${FILES[@]/%/.yaml}")
fuseci update-baselines "${FILES[@]}" --baselines baselines --report-dir "$W/rerecord" > "$W/logs/rerecord.out" 2>&1
echo "rerecord rc=$?"; cat "$W/logs/rerecord.out"
if [[ "${FUSECI_AB:-1}" != 0 ]] && git rev-parse --verify -q HEAD > /dev/null; then
  mkdir -p "$W/ab"; red=0
  for i in $(seq 1 "$N"); do
    t0=$(date +%s.%N)
    fuseci ab HEAD HEAD --all --report-dir "$W/ab-out" --json "$W/ab/aa-$i.json" > "$W/logs/aa-$i.out" 2>&1
    rc=$?; [[ $rc -ne 0 ]] && red=$((red + 1))
    printf 'A/A %3s rc %s %8.1f s\n' "$i" "$rc" "$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$(date +%s.%N)")" | tee -a "$W/runs.txt"
    [[ $rc -ne 0 ]] && grep -E "REGRESSED|ERROR|WRONG|error" "$W/logs/aa-$i.out" | head -n 20
  done
  echo "A/A false reds: $red of $N" | tee -a "$W/runs.txt"
fi
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv
