#!/usr/bin/env bash
# One device call for issue 19 (selection at request sizes), optionally with a kernel patch measured beside it:
#  1. build (gpu preset, every entry) and the GPU test suite (ctest -L gpu; the CPU tests run on the CPU machine);
#  2. with PATCH=<file> (git format-patch output, e.g. bench/next/wgmma_next.patch): a copy of the tree with the
#     patch applied, built with only the entries matching $PATCH_ENTRIES, and bench_mma_attention --entries
#     $PATCH_ENTRIES on both builds (the same tensors and masks), so the two kernels are compared in one run;
#  3. with SAN_FILTER="<tool>=<gtest filter> ...": those compute-sanitizer runs side by side (SAN_SECONDS each, 75);
#  4. with BENCH_FAMILIES=F1,F2: bench_mma_attention --no-wan --families F1,F2 $BENCH_ARGS on the main build
#     (tessera_mma_bench.json; BENCH_TIMEOUT seconds, 150);
#  5. `tessera profile --whole-requests` until $PROFILE_END seconds after the start, in passes that widen the case
#     choice ($PASSES: "<split> <cases per family>;..."; the profile file is resumable, so each pass adds cases),
#     then, with CASE_PASSES (same form), the stored corpus cases (1-4 heads; every eligible plan) into
#     profile_cases.jsonl; FAMILIES="F1 F2" limits both to those families.
# Returns $OUT/profile_whole.jsonl.gz (and profile_cases.jsonl.gz), the benchmark JSONs and $OUT/logs.tgz.
# Usage on the GPU machine: OUT=... [PATCH=...] [PROFILE_END=480] [PASSES=...] [PLANS=<plan-id regex>]
#   [FAMILIES=...] [CASE_PASSES=...] [WHOLE_END_S=<s>] [SAN_FILTER=...] [BENCH_FAMILIES=...] bench/run_requests_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT"
L="$OUT/logs"; mkdir -p "$L"
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
. bench/gpu_steps.sh
OUT="$L" scripts/gpu_check.sh -j 16 -L gpu --timeout 240 > "$L/gpu_check.log" 2>&1
stamp "build + ctest -L gpu rc=$?"; grep -E "gpu build|tests passed|tests failed|\(Failed\)|Timeout" "$L/gpu_check.log" | head -20
B=build/gpu/bin
DEPS="$PWD/.deps/root/usr"
export LD_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
if [ -n "${PATCH:-}" ]; then
  E="${PATCH_ENTRIES:-^wgmma\.bf16\.d128\.}"
  P=/tmp/tessera_patched; rm -rf "$P"; mkdir -p "$P"
  tar cf - --exclude=./build --exclude=./.whl --exclude=./.git . | tar xf - -C "$P"
  (cd "$P" && git apply "$OLDPWD/$PATCH") > "$L/patch_apply.log" 2>&1; stamp "patch apply rc=$?"
  (cd "$P" && cmake --preset gpu -G Ninja -DCMAKE_PREFIX_PATH="$DEPS" -DTESSERA_KERNEL_FILTER="$E" \
     -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" -DTESSERA_BUILD_PYTHON=OFF \
     > "$L/patch_configure.log" 2>&1 &&
   cmake --build --preset gpu -j 16 --target bench_mma_attention > "$L/patch_build.log" 2>&1)
  stamp "patched build rc=$?"; grep -E "error" "$L/patch_build.log" | head -10
  for side in main patched; do
    bin=$B/bench_mma_attention; [ $side = patched ] && bin=$P/build/gpu/bin/bench_mma_attention
    mkdir -p "$OUT/bench_$side"
    timeout 150 "$bin" --out "$OUT/bench_$side" --data /tmp/tessera_bench_$side --entries "$E" > "$L/bench_$side.log" 2>&1
    stamp "bench $side rc=$?"; rm -rf /tmp/tessera_bench_$side
  done
  for side in main patched; do echo "== $side"; grep -E "TFLOP|rror" "$L/bench_$side.log" | cut -c1-120 | head -45; done
fi
if [ -n "${SAN_FILTER:-}" ]; then
  for run in $SAN_FILTER; do  # side by side: the kernels' grids are small
    ( timeout "${SAN_SECONDS:-75}" compute-sanitizer --tool "${run%%=*}" --error-exitcode 9 \
        build/gpu/tests/tessera_tests_gpu --gtest_filter="${run#*=}" > "$L/san_${run%%=*}.log" 2>&1
      echo "rc=$?" >> "$L/san_${run%%=*}.log" ) &
  done
  wait
  for run in $SAN_FILTER; do
    t=${run%%=*}; stamp "$t $(tail -1 "$L/san_$t.log"): $(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$L/san_$t.log" | tail -1)"
  done
fi
if [ -n "${BENCH_FAMILIES:-}" ]; then
  timeout "${BENCH_TIMEOUT:-150}" $B/bench_mma_attention --no-wan --families "$BENCH_FAMILIES" --out "$OUT" \
    --data /tmp/tessera_bench_f ${BENCH_ARGS:-} > "$L/bench_families.log" 2>&1
  stamp "bench --families $BENCH_FAMILIES rc=$?"; grep -E "TFLOP|rror" "$L/bench_families.log" | cut -c1-120 | head -70
  rm -rf /tmp/tessera_bench_f
fi
PF="$OUT/profile_whole.jsonl"
WHOLE_END=$(( T0 + ${WHOLE_END_S:-${PROFILE_END:-480}} ))  # WHOLE_END_S: leave the rest to CASE_PASSES
profile_passes "$PF" "$L/profile.log" "$WHOLE_END" "${PASSES:-evaluation 2;profiling 3;profiling 6;evaluation 4;profiling 10;profiling 20}" \
  --whole-requests ${PLANS:+--plans "$PLANS"}
if [ -n "${CASE_PASSES:-}" ]; then
  PC="$OUT/profile_cases.jsonl"
  profile_passes "$PC" "$L/profile.log" "$(( T0 + ${PROFILE_END:-480} ))" "$CASE_PASSES" ${CASE_PLANS:+--plans "$CASE_PLANS"}
  [ -f "$PC" ] && gzip -f "$PC"
fi
grep -c invalid "$L/profile.log"; grep "invalid" "$L/profile.log" | head -5
[ -f "$PF" ] && gzip -f "$PF"
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$L"
