#!/usr/bin/env bash
# One device call (issue 18, session 13): the foreign-entry skip of the two-consumer wgmma tiles (consumer.cuh),
# checked and measured against the kernel before it, plus the one-stage swapped tile of bench/next/wgmma_t32s1.patch.
#  1. build (gpu preset, every entry, so that `tessera profile` can follow on the warm machine) and the kernel tests
#     (tessera_tests_gpu --gtest_filter='PtxSm90*:*MmaAttention*': every entry x mapping, the new
#     coarsened_q2/halves cases included);
#  2. beside it, two copies of the tree built with bench_mma_attention only: "noskip" (bench/next/wgmma_noskip.patch:
#     the kernel before the skip) and "t32s1" (bench/next/wgmma_t32s1.patch);
#  3. bench_mma_attention on the same tensors and masks: main and noskip over the 64-row families and the Wan
#     geometries (band + random, top-k) on the wgmma d128 tiles, main and t32s1 over the 16/32-row families;
#  4. racecheck and synccheck side by side on the t128x64 entry's tests (the skipping consumer).
# Usage on the GPU machine: OUT=... bench/run_skip_gpu.sh   (carry [".deps", ".revision"]); ~6-7 minutes.
# Outputs: $OUT/bench_{main,noskip,main_small,t32s1}/tessera_mma_bench.json, $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"; L="$OUT/logs"; mkdir -p "$L"
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
DEPS="$PWD/.deps/root/usr"
export LD_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
NVCC="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"

# side_tree <name> <patch> <kernel filter>: a patched copy of the tree, bench_mma_attention only (background)
side_tree() {
  local P=/tmp/tessera_$1; rm -rf "$P"; mkdir -p "$P"
  tar cf - --exclude=./build --exclude=./.whl --exclude=./.git . | tar xf - -C "$P"
  (cd "$P" && git apply "$OLDPWD/$2" && cmake --preset gpu -G Ninja -DCMAKE_PREFIX_PATH="$DEPS" \
     -DTESSERA_KERNEL_FILTER="$3" -DCMAKE_CUDA_COMPILER="$NVCC" -DTESSERA_BUILD_PYTHON=OFF &&
   cmake --build --preset gpu -j 6 --target bench_mma_attention) > "$L/build_$1.log" 2>&1
  echo "rc=$?" >> "$L/build_$1.log"
}
BIG='^wgmma\.bf16\.d128\.t(128x64|128x128|64x64|64x128)\.'
SMALL='^wgmma\.bf16\.d128\.t(16x64|32x64|64x64|64x128|128x128)\.'
side_tree noskip bench/next/wgmma_noskip.patch "$BIG" &
side_tree t32s1 bench/next/wgmma_t32s1.patch "$SMALL" &
OUT="$L" scripts/gpu_check.sh -j 16 -R '^$' > "$L/gpu_check.log" 2>&1
stamp "main build rc=$?"; grep -E "gpu build|rror" "$L/gpu_check.log" | head -5
T=build/gpu/tests/tessera_tests_gpu
timeout 240 "$T" --gtest_filter='PtxSm90*:*MmaAttention*' > "$L/kernel_tests.log" 2>&1
stamp "kernel tests rc=$?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$L/kernel_tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]|Failure|relative L2|LSE\[' "$L/kernel_tests.log" | head -20
wait
for s in noskip t32s1; do stamp "build $s: $(tail -1 "$L/build_$s.log")"; done
bench() {  # bench <name> <binary> <families> <entries>
  mkdir -p "$OUT/bench_$1"
  timeout 150 "$2" --out "$OUT/bench_$1" --data "/tmp/tessera_bench_$1" --families "$3" --entries "$4" > "$L/bench_$1.log" 2>&1
  stamp "bench $1 rc=$?"; rm -rf "/tmp/tessera_bench_$1"
}
FAM_BIG=Q64K64-HD,Q64K64,Q64K64-DD,Q64K32,Q32K32,Wan720p-Q64K64,Wan720p-topk
FAM_SMALL=Q16K16,Q32K16,Q32K32
bench main build/gpu/bin/bench_mma_attention "$FAM_BIG" "$BIG"
bench noskip /tmp/tessera_noskip/build/gpu/bin/bench_mma_attention "$FAM_BIG" "$BIG"
bench main_small build/gpu/bin/bench_mma_attention "$FAM_SMALL" "$SMALL"
bench t32s1 /tmp/tessera_t32s1/build/gpu/bin/bench_mma_attention "$FAM_SMALL" "$SMALL"
for s in main noskip main_small t32s1; do echo "== $s"; grep -E "TFLOP|rror" "$L/bench_$s.log" | cut -c1-110 | head -40; done
for tool in racecheck synccheck; do
  ( timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 "$T" \
      --gtest_filter='*MmaAttention*t128x64_w12_s2*' > "$L/san_$tool.log" 2>&1; echo "rc=$?" >> "$L/san_$tool.log" ) &
done
wait
for tool in racecheck synccheck; do
  stamp "$tool $(tail -1 "$L/san_$tool.log"): $(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$L/san_$tool.log" | tail -1)"
done
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$L"
