#!/usr/bin/env bash
# One device call: a kernel change checked and measured against other versions of the kernel on the same tensors and
# masks (bench/NOTES.md, sessions 13-):
#  1. build (gpu preset, every entry, so that `tessera profile` or the scoreboard can follow on the warm machine) and
#     the kernel tests (tessera_tests_gpu --gtest_filter='PtxSm90*:*MmaAttention*': every entry x mapping), or with
#     FULL_SUITE=1 the whole GPU suite (ctest -L gpu);
#  2. beside it, for each SIDES item name=patch, a copy of the tree with the patch applied (git apply), built with
#     bench_mma_attention only and the entries matching ENTRIES;
#  3. bench_mma_attention --families FAMILIES --entries ENTRIES on the main build, then on each side build;
#     with SMALL_SIDES / SMALL_FAMILIES / SMALL_ENTRIES the same for a second set (e.g. the 16/32-row tiles);
#  4. with NCU_FAMILIES=F1,...: Nsight Compute (speed of light, compute and memory workload, warp states, occupancy)
#     on the main build's first NCU_LAUNCHES (12) attention kernels of those families (entries NCU_ENTRIES, default
#     ENTRIES) -> $OUT/ncu_details.csv (--page raw: one row per launch; bench/ncu_summary.py reads it);
#  5. with SAN_FILTER (a gtest filter): memcheck, racecheck and synccheck side by side on those tests.
# QUICK=1: a first look at a kernel change when device time is short (session 17: one entry builds in ~50 s, the
#   whole gpu preset in ~120 s): main is built like the sides, only the entries of ENTRIES and SMALL_ENTRIES and
#   bench_mma_attention, and steps 1 (tests), 4 (Nsight Compute) and 5 (sanitizers) are skipped; a change that pays is
#   then checked with the full call.
# Usage on the GPU machine: OUT=... SIDES="before=bench/next/x.patch ..." [ENTRIES=regex] [FAMILIES=F1,F2,...]
#   [SMALL_SIDES=... SMALL_ENTRIES=... SMALL_FAMILIES=...] [NCU_FAMILIES=... NCU_ENTRIES=...] [SAN_FILTER=...]
#   [SAN_TIMEOUT=seconds (100)] [FULL_SUITE=1 | QUICK=1] [MAIN_BENCH_ARGS="--persistent"]
#   [BENCH_ARGS="--flush-l2" (every build's bench_mma_attention)] [BENCH_TIMEOUT=seconds (150)]
#   bench/run_kernel_ab_gpu.sh
#   (carry [".deps", ".revision"]); ~3-5 minutes.
# Outputs: $OUT/bench_<name>/tessera_mma_bench.json (main, each side; main_small and <name>_small for the small
#   sides), $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"; L="$OUT/logs"; mkdir -p "$L"
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
. bench/gpu_steps.sh
DEPS="$PWD/.deps/root/usr"
export LD_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
NVCC="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
T=build/gpu/tests/tessera_tests_gpu
ENTRIES="${ENTRIES:-^wgmma\.bf16\.d128\.t(128x64|128x128|64x64|64x128)\.}"
FAMILIES="${FAMILIES:-Q64K64-HD,Q64K64,Q64K64-DD,Q64K32,Q128K64,Q128K128,Dense,Wan720p-Q64K64,Wan720p-topk}"
SMALL_ENTRIES="${SMALL_ENTRIES:-.}"
if [ -n "${SMALL_SIDES:-}" ]; then : "${SMALL_FAMILIES:?SMALL_SIDES needs SMALL_FAMILIES}"; fi

# side_tree <name> <patch> <kernel filter>: a patched copy of the tree, bench_mma_attention only (run in background).
# A patch written R:<file> is applied in reverse (git apply -R): the side is then the tree before a change that the
# main tree already carries, e.g. SIDES="before=R:bench/next/x.patch" after `git apply bench/next/x.patch` here.
# The patch "-" means none (QUICK=1's main tree).
side_tree() {
  local P=/tmp/tessera_$1 patch rev=() apply=(true); patch="$2"
  if [ "${patch#R:}" != "$patch" ]; then patch="${patch#R:}"; rev=(-R); fi
  [ "$patch" != - ] && patch="$(realpath "$patch")" && apply=(git apply "${rev[@]}" "$patch")
  rm -rf "$P"; mkdir -p "$P"
  tar cf - --exclude=./build --exclude=./.whl --exclude=./.git . | tar xf - -C "$P"
  (cd "$P" && "${apply[@]}" && cmake --preset gpu -G Ninja -DCMAKE_PREFIX_PATH="$DEPS" \
     -DTESSERA_KERNEL_FILTER="$3" -DCMAKE_CUDA_COMPILER="$NVCC" -DTESSERA_BUILD_PYTHON=OFF &&
   cmake --build --preset gpu -j 6 --target bench_mma_attention) > "$L/build_$1.log" 2>&1
  echo "rc=$?" >> "$L/build_$1.log"
}
for side in ${SIDES:-}; do side_tree "${side%%=*}" "${side#*=}" "$ENTRIES" & done
for side in ${SMALL_SIDES:-}; do side_tree "${side%%=*}_small" "${side#*=}" "$SMALL_ENTRIES" & done  # own trees
MAIN_BENCH=build/gpu/bin/bench_mma_attention
if [ -n "${QUICK:-}" ]; then  # no tests, no sanitizers: main built like a side (ENTRIES and SMALL_ENTRIES only)
  side_tree main - "(${ENTRIES})${SMALL_SIDES:+|(${SMALL_ENTRIES})}"; stamp "main build (QUICK): $(tail -1 "$L/build_main.log")"
  MAIN_BENCH=/tmp/tessera_main/build/gpu/bin/bench_mma_attention
elif [ -n "${FULL_SUITE:-}" ]; then  # the whole GPU suite (ctest -L gpu: C++ and Python), through gpu_check.sh's env
  OUT="$L" scripts/gpu_check.sh -j 16 -L gpu --timeout 240 > "$L/gpu_check.log" 2>&1
  stamp "main build + ctest -L gpu rc=$?"; grep -E "gpu build|tests passed|tests failed|\(Failed\)|Timeout|rror" "$L/gpu_check.log" | head -20
else
  OUT="$L" scripts/gpu_check.sh -j 16 -R '^$' > "$L/gpu_check.log" 2>&1
  stamp "main build rc=$?"; grep -E "gpu build|rror" "$L/gpu_check.log" | head -5
  timeout 240 "$T" --gtest_filter='PtxSm90*:*MmaAttention*' > "$L/kernel_tests.log" 2>&1
  stamp "kernel tests rc=$?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$L/kernel_tests.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]|Failure|relative L2|LSE\[|S = Q' "$L/kernel_tests.log" | head -20
fi
wait
for side in ${SIDES:-}; do stamp "build ${side%%=*}: $(tail -1 "$L/build_${side%%=*}.log")"; done
for side in ${SMALL_SIDES:-}; do stamp "build ${side%%=*}_small: $(tail -1 "$L/build_${side%%=*}_small.log")"; done
bench() {  # bench <name> <binary> <families> <entries> [more bench_mma_attention arguments]
  mkdir -p "$OUT/bench_$1"
  timeout "${BENCH_TIMEOUT:-150}" "$2" --out "$OUT/bench_$1" --data "/tmp/tessera_bench_$1" --families "$3" --entries "$4" ${5:-} \
    > "$L/bench_$1.log" 2>&1
  stamp "bench $1 rc=$?"; rm -rf "/tmp/tessera_bench_$1"
  echo "== $1"; grep -E "TFLOP|rror" "$L/bench_$1.log" | cut -c1-110 | head -60
}
bench main "$MAIN_BENCH" "$FAMILIES" "$ENTRIES" "${MAIN_BENCH_ARGS:-} ${BENCH_ARGS:-}"
for side in ${SIDES:-}; do
  bench "${side%%=*}" "/tmp/tessera_${side%%=*}/build/gpu/bin/bench_mma_attention" "$FAMILIES" "$ENTRIES" "${BENCH_ARGS:-}"
done
if [ -n "${SMALL_SIDES:-}" ]; then
  bench main_small "$MAIN_BENCH" "$SMALL_FAMILIES" "$SMALL_ENTRIES" "${BENCH_ARGS:-}"
  for side in $SMALL_SIDES; do
    bench "${side%%=*}_small" "/tmp/tessera_${side%%=*}_small/build/gpu/bin/bench_mma_attention" "$SMALL_FAMILIES" \
      "$SMALL_ENTRIES" "${BENCH_ARGS:-}"
  done
fi
if [ -n "${NCU_FAMILIES:-}" ] && [ -z "${QUICK:-}" ]; then  # Nsight Compute on the main build: where the named kernels' cycles go
  mkdir -p /tmp/tessera_ncu
  timeout 200 ncu --clock-control none --kernel-name regex:attention_kernel --launch-count "${NCU_LAUNCHES:-12}" \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section Occupancy --csv --page raw \
    build/gpu/bin/bench_mma_attention --families "$NCU_FAMILIES" --entries "${NCU_ENTRIES:-$ENTRIES}" --reps 1 \
    --out /tmp/tessera_ncu --data /tmp/tessera_ncu_data > "$OUT/ncu_details.csv" 2> "$L/ncu.err"
  stamp "ncu rc=$? ($(grep -c '^"' "$OUT/ncu_details.csv") csv lines)"; rm -rf /tmp/tessera_ncu_data
fi
[ -n "${SAN_FILTER:-}" ] && [ -z "${QUICK:-}" ] && sanitize "$T" "$SAN_FILTER" "$L" "${SAN_TIMEOUT:-100}"
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$L"
