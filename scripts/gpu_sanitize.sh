#!/usr/bin/env bash
# compute-sanitizer over the GPU test suite (issue 21, item 4), on the GPU machine after scripts/gpu_check.sh built
# build/gpu:
#   memcheck  over every test of tests/gpu (the whole gtest binary, in $SHARDS gtest shards run side by side) and,
#             with PY=1, over the Python GPU tests (python/tests/test_gpu.py; --target-processes all);
#   racecheck and synccheck over the kernel tests (PtxSm90, Ptx, MmaAttention: every catalog entry and mapping).
# Each run gets --error-exitcode 9 and its own log; a summary line per run says its exit code and the sanitizer's
# "ERROR SUMMARY". Time budget per tool: SAN_SECONDS (default 240); a run cut off by it says "timeout" (rc 124), which
# is not a pass. Output: ${OUT:-out}/sanitizers/<tool>_<shard>.log and summary.txt.
# Usage: OUT=... [SHARDS=4] [SAN_SECONDS=240] [PY=1] [TOOLS="memcheck racecheck synccheck"] scripts/gpu_sanitize.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}/sanitizers"; mkdir -p "$OUT"
T=build/gpu/tests/tessera_tests_gpu
[ -x "$T" ] || { echo "gpu_sanitize: $T missing: run scripts/gpu_check.sh first"; exit 3; }
DEPS="$PWD/.deps/root/usr"
export LD_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
SHARDS="${SHARDS:-4}"
LIMIT="${SAN_SECONDS:-240}"
KERNELS='PtxSm90*:Ptx*:*MmaAttention*'
summary() {  # tool shard rc log
  echo "$1 $2 rc=$3 $(grep -h -E '(ERROR|RACECHECK) SUMMARY' "$4" | tail -1)" >> "$OUT/summary.txt"
}
: > "$OUT/summary.txt"
for tool in ${TOOLS:-memcheck racecheck synccheck}; do
  filter='*'; [ "$tool" = memcheck ] || filter="$KERNELS"
  pids=()
  for ((s = 0; s < SHARDS; ++s)); do
    ( GTEST_TOTAL_SHARDS=$SHARDS GTEST_SHARD_INDEX=$s timeout "$LIMIT" compute-sanitizer --tool "$tool" \
        --error-exitcode 9 "$T" --gtest_filter="$filter" > "$OUT/${tool}_$s.log" 2>&1
      summary "$tool" "shard$s/$SHARDS" $? "$OUT/${tool}_$s.log" ) &
    pids+=($!)
  done
  wait "${pids[@]}"
done
if [ "${PY:-0}" = 1 ]; then
  export PYTHONPATH="$PWD/python:$PWD/build/gpu/python:$PWD/.deps/python${PYTHONPATH:+:$PYTHONPATH}"
  timeout "$LIMIT" compute-sanitizer --tool memcheck --target-processes all --error-exitcode 9 \
    python3 -m pytest -q python/tests/test_gpu.py > "$OUT/memcheck_python.log" 2>&1
  summary memcheck python $? "$OUT/memcheck_python.log"
fi
cat "$OUT/summary.txt"
! grep -v -E "rc=0 .*(ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors)" "$OUT/summary.txt" | grep -q .
