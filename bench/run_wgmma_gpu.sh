#!/usr/bin/env bash
# One device call for the wgmma family: build + the Hopper PTX tests and every wgmma entry's reference tests
# (scripts/gpu_check.sh), the SASS summary of each wgmma kernel (HGMMA count, local-memory instructions),
# compute-sanitizer memcheck / racecheck / synccheck on one entry of each tile shape, the kernel benchmark (mma and
# wgmma candidates side by side) and the FlexAttention comparison on the same tensors. Everything lands in
# $OUT/wgmma_logs.tgz plus the benchmark JSON (the device call returns at most 8 files).
# Usage on the GPU machine (repository root): OUT=... bench/run_wgmma_gpu.sh   (knobs: TESTS, SAN=0, BENCH=0)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT"
L="$OUT/logs"; mkdir -p "$L"
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
OUT="$L" scripts/gpu_check.sh -j 16 -R "${TESTS:-PtxSm90|wgmma}"
stamp "gpu_check rc=$?"
grep -E "^ *[0-9]+/[0-9]+ Test|tests passed|Failed" "$L/ctest.log" | grep -v " Passed" | head -30
T=build/gpu/tests/tessera_tests_gpu
# SASS: per kernel function, HGMMA instructions and local-memory loads/stores.
for o in build/gpu/src/kernels/CMakeFiles/tessera_kernels.dir/generated/entry_wgmma_*.o; do
  cuobjdump -sass "$o" | awk -v f="$(basename "$o")" '/Function :/ {name=$3} /HGMMA/ {h[name]++} /(LDL|STL)/ {l[name]++}
    END {for (n in h) printf "%s %s HGMMA=%d LDL/STL=%d\n", f, substr(n, 1, 60), h[n], l[n] + 0}'
done > "$L/sass_summary.txt" 2>&1
stamp "sass"; cut -c1-150 "$L/sass_summary.txt" | head -40
if [ "${SAN:-1}" = 1 ]; then
  E1='Catalog/MmaAttention.*/wgmma_bf16_d128_t128x128_w12_s2' E2='Catalog/MmaAttention.*/wgmma_bf16_d128_t64x64_w8_s2'
  for run in "memcheck PtxSm90.*:$E1" "racecheck $E2" "synccheck $E1"; do
    set -- $run
    timeout "${SAN_SECONDS:-90}" compute-sanitizer --tool "$1" --error-exitcode 9 $T --gtest_filter="$2" > "$L/$1.log" 2>&1
    stamp "$1 rc=$?"; tail -2 "$L/$1.log"
  done
fi
if [ "${BENCH:-1}" = 1 ]; then
  DATA=/tmp/tessera_bench
  timeout 200 build/gpu/bin/bench_mma_attention --out "$OUT" --data $DATA ${BENCH_ARGS:-} > "$L/bench_mma_attention.log" 2>&1
  stamp "bench rc=$?"; grep -E "wg|Dense" "$L/bench_mma_attention.log" | head -80
  timeout 150 python3 bench/flex_vs_tessera.py --tessera "$OUT/tessera_mma_bench.json" --data $DATA \
    --out "$OUT/flex_vs_tessera.json" > "$L/flex.log" 2>&1
  stamp "flex rc=$?"; grep -v Warning "$L/flex.log" | tail -16
fi
tar czf "$OUT/wgmma_logs.tgz" -C "$OUT" logs && rm -rf "$L"
