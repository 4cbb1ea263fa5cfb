#!/usr/bin/env bash
# The in-process counters' probe on a GPU machine, in one call: install, then each suite counted
# by ncu and by CUPTI in the harness (tools/cupti_probe.py), suites started while BUDGET seconds
# remain, the results packed into $OUT/probe.tar.xz and the table printed last.
#   bash tools/cupti-probe.sh BUDGET SUITE...
# Wheels it installs from .whl/ (no network on a GPU machine): fuseci's dependencies the machine
# lacks, and nvidia-cuda-cupti 13.4.92, whose libcupti the c134* runs load (FUSECI_CUPTI_LIBRARY).
set -uo pipefail
budget=${1:?budget seconds}; shift
start=$SECONDS
python3 -m pip install -q --no-index --no-build-isolation --find-links .whl -e . 2>&1 | grep -v WARNING | tail -3
python3 -m pip install -q --no-deps --target /tmp/c134 .whl/nvidia_cuda_cupti-13.4.92-*.whl 2>&1 | tail -1
lib134=/tmp/c134/nvidia/cu13/lib/libcupti.so.13
work=${OUT:-/tmp}/probe
mkdir -p "$work"
{
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
    ncu --version | tail -1
    python3 -c "import torch, triton, cupy; print('torch', torch.__version__, 'triton', triton.__version__, 'cupy', cupy.__version__)"
    python3 - <<'EOF'
import sys
from pathlib import Path
for e in sys.path:
    for p in Path(e).glob("nvidia*cupti*.dist-info"):
        print("venv", p.name)
EOF
    ls /usr/local/cuda/extras/CUPTI/lib64/libcupti.so* 2>/dev/null
} > "$work/machine.txt" 2>&1
cat "$work/machine.txt"
done_suites=()
for suite in "$@"; do
    left=$((budget - (SECONDS - start)))
    if [ "$left" -lt 60 ]; then echo "skipped $suite: ${left}s left"; continue; fi
    extra=(--extra "c134:FUSECI_CUPTI_LIBRARY=$lib134" --extra "c134user:FUSECI_CUPTI_LIBRARY=$lib134,FUSECI_CUPTI_REPLAY=user")
    if [[ "$suite" == *elementwise* ]]; then
        extra+=(--plain elementwise --extra "c134notma:FUSECI_CUPTI_LIBRARY=$lib134,FUSECI_CUPTI_TMA=0" --extra "c134all:FUSECI_CUPTI_LIBRARY=$lib134,FUSECI_CUPTI_CACHE=all,FUSECI_CUPTI_TMA=0")
    fi
    if [[ "$suite" == *models.yaml ]]; then extra+=(--plain models); fi
    timeout "$left" python3 tools/cupti_probe.py --out "$work" "${extra[@]}" "$suite" > "$work/$(basename "$suite" .yaml).table" 2>&1
    echo "$suite: rc $? at $((SECONDS - start))s"
    done_suites+=("$suite")
    head -c 600 "$work/$(basename "$suite" .yaml)/cupti.jsonl" 2>/dev/null; echo
done
(cd "${OUT:-/tmp}" && find probe -name '*.jsonl' -o -name 'compare-*.json' -o -name 'walls.json' -o -name '*.table' -o -name machine.txt | tar -cf - -T - | xz -9 -T0 > probe.tar.xz)
cat "$work"/*.table
rm -rf "$work"
