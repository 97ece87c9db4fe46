#!/usr/bin/env bash
# One device call for the mma.sync family: build + GPU tests (scripts/gpu_check.sh), compute-sanitizer memcheck
# and racecheck on a representative subset, the C++ benchmark and the FlexAttention comparison.
# Usage on the GPU machine (from the repository root): OUT=... bench/run_kernels_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT"
scripts/gpu_check.sh -j 16 -R "Ptx|MmaAttention"
echo "gpu_check rc=$?"
[ -f .revision ] && cp .revision "$OUT/revision.txt"  # devsync copies carry the branch revision
T=build/gpu/tests/tessera_tests_gpu
SUB='Catalog/MmaAttention.*/mma_bf16_d128_t64x64_w4_s2:Catalog/MmaAttention.*/mma_f16_d64_t64x64_w4_s2:Ptx.*'
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter="$SUB" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; tail -4 "$OUT/memcheck.log"
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_filter='Catalog/MmaAttention.*/mma_bf16_d128_t32x64_w2_s2:Ptx.*' > "$OUT/racecheck.log" 2>&1
echo "racecheck rc=$?"; tail -4 "$OUT/racecheck.log"
DATA=/tmp/tessera_bench
build/gpu/bin/bench_mma_attention --out "$OUT" --data $DATA ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench_mma_attention.log" | tail -60
python3 bench/flex_vs_tessera.py --tessera "$OUT/tessera_mma_bench.json" --data $DATA --out "$OUT/flex_vs_tessera.json" 2>&1 | tee "$OUT/flex.log" | grep -v Warning | tail -30
