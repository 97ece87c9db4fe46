#!/usr/bin/env bash
# One device call (issue 19): the gpu-preset build and the whole GPU suite (ctest -L gpu: the (48, 80) Python case
# included), then the A0 / A1 / A2 ablation (bench/peers/ablation.py) with the time that is left.
# Usage on the GPU machine: OUT=... [REQUESTS=3] [END=540] bench/run_ablation_gpu.sh   (carry [".deps", ".revision"])
# Outputs: $OUT/ablation/ablation.json, ablation.md, $OUT/logs.tgz. Expected ~5-6 minutes on one H200.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"; L="$OUT/logs"; mkdir -p "$L"
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
OUT="$L" scripts/gpu_check.sh -j 16 -L gpu --timeout 240 > "$L/gpu_check.log" 2>&1
stamp "build + ctest -L gpu rc=$?"; grep -E "gpu build|tests passed|tests failed|\(Failed\)|Timeout" "$L/gpu_check.log" | head
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
left=$(( T0 + ${END:-540} - $(date +%s) - 20 ))
timeout -k 10 $(( left + 15 )) python3 bench/peers/ablation.py --out "$OUT/ablation" --requests "${REQUESTS:-3}" \
  --seconds "$left" > "$L/ablation.log" 2>&1
stamp "ablation rc=$?"; grep -v -i warn "$L/ablation.log" | tail -30
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$L"
