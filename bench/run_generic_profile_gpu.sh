#!/usr/bin/env bash
# One device call (session 12): profile the generic masks of bench/generic_masks.py (every family, wgmma plans and
# each case's default and Direct plans) for the embedded sm90a table, then compute-sanitizer over the GPU suite.
#  1. the masks are generated (numpy, in the background) while the gpu preset builds (every entry);
#  2. `tessera profile --masks` until PROFILE_END seconds after the start -> $OUT/profile_generic.jsonl.gz;
#  3. scripts/gpu_sanitize.sh (memcheck over every GPU test, racecheck and synccheck over the kernel tests) and memcheck
#     over the Python GPU tests, side by side, each cut at SAN_SECONDS -> $OUT/sanitizers.tgz (summary.txt + one log per run).
# Usage on the GPU machine: OUT=... [PROFILE_END=330] [SAN_SECONDS=200] [SHARDS=4] [SAN_TOOLS="memcheck racecheck synccheck"]
#   [SAN_PY=1] bench/run_generic_profile_gpu.sh
# Carry [".deps", ".revision"].
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT/logs"
L="$OUT/logs"
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
M=/tmp/generic_masks
python3 bench/generic_masks.py --out "$M" > "$L/generic_masks.log" 2>&1 &
GEN=$!
OUT="$L" scripts/gpu_check.sh -j 16 -R '^none$' > "$L/gpu_check.log" 2>&1
stamp "build rc=$? ($(grep 'gpu build' "$L/gpu_check.log"))"
wait $GEN; stamp "generic masks rc=$? ($(ls "$M" | wc -l) files)"
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
PF="$OUT/profile_generic.jsonl"
left=$(( T0 + ${PROFILE_END:-330} - $(date +%s) ))
timeout "$left" build/gpu/bin/tessera profile --masks "$M" --out "$PF" --reps 3 --splits profiling evaluation \
  --plans '\.wgmma\.' > "$L/profile_generic.log" 2>&1
stamp "profile --masks rc=$? ($(cat "$PF" 2>/dev/null | wc -l) records, $(grep -c invalid "$L/profile_generic.log") invalid lines)"
[ -f "$PF" ] && gzip -f "$PF"
( export SAN_SECONDS="${SAN_SECONDS:-200}" SHARDS="${SHARDS:-4}"
  for tool in ${SAN_TOOLS:-memcheck racecheck synccheck}; do
    OUT="$OUT/san_$tool" TOOLS=$tool scripts/gpu_sanitize.sh > "$L/san_$tool.console" 2>&1 &
  done
  # the Python GPU tests (ctest's python_gpu) under memcheck, beside the gtest shards (gpu_sanitize.sh's PY=1 step)
  if [ "${SAN_PY:-1}" = 1 ]; then
  mkdir -p "$OUT/san_py/sanitizers"
  PYTHONPATH="$PWD/python:$PWD/build/gpu/python:$PWD/.deps/python" timeout "$SAN_SECONDS" compute-sanitizer \
    --tool memcheck --target-processes all --error-exitcode 9 python3 -m pytest -q python/tests/test_gpu.py \
    > "$OUT/san_py/sanitizers/memcheck_python.log" 2>&1
  echo "memcheck python rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/san_py/sanitizers/memcheck_python.log" | tail -1)" \
    > "$OUT/san_py/sanitizers/summary.txt"
  fi
  wait )
mkdir -p "$OUT/sanitizers"
for tool in memcheck racecheck synccheck py; do
  cp "$OUT/san_$tool/sanitizers/"*.log "$OUT/sanitizers/" 2>/dev/null
  cat "$OUT/san_$tool/sanitizers/summary.txt" >> "$OUT/sanitizers/summary.txt" 2>/dev/null
  rm -rf "$OUT/san_$tool"
done
stamp "sanitizers:"; cat "$OUT/sanitizers/summary.txt"
for f in "$OUT"/sanitizers/*.log; do echo "$(basename "$f"): $(grep -c '^\[       OK \]' "$f") tests OK, last: $(grep -E '^\[ RUN      \]' "$f" | tail -1 | cut -c1-110)"; done
tar czf "$OUT/sanitizers.tgz" -C "$OUT" sanitizers && rm -rf "$OUT/sanitizers"
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$L"
