#!/usr/bin/env bash
# One device call that re-profiles inputs of the embedded sm90a table after a plan or kernel change (session 16: the
# `g1p` plans, which the older records lack), with the kernel checks of that change on the same build:
#  1. build (gpu preset, every entry) while bench/generic_masks.py writes the generic masks;
#  2. the kernel tests (tessera_tests_gpu --gtest_filter=$TESTS, default every PTX wrapper and every wgmma entry;
#     TESTS=none skips them);
#  3. with SAN_FILTER (a gtest filter): memcheck, racecheck and synccheck side by side on those tests (SAN_TIMEOUT, 100 s);
#  4. with NCU_FAMILIES=F1,...: Nsight Compute on the first NCU_LAUNCHES (4) attention kernels of bench_mma_attention
#     over those families and the entries NCU_ENTRIES -> $OUT/ncu_details.csv (bench/ncu_summary.py reads it);
#  5. `tessera profile --masks` on the generic masks, plans matching $PLANS (default '\.wgmma\.') plus each mask's default
#     and Direct plans, until GENERIC_END seconds after the start -> $OUT/profile_generic.jsonl.gz; with
#     GENERIC_MATCH=<extended regex> only the mask files whose names match (e.g. '__r[34]\.' for the requests added
#     since the last profile);
#  6. `tessera profile` on the stored corpus cases of FAMILIES (space-separated) in CASE_PASSES ("<split> <cases per
#     family>;...", resumable, each pass adds cases), same plans, until PROFILE_END -> $OUT/profile_cases.jsonl.gz;
#     RESUME_CASES=<.jsonl.gz> seeds that file with an earlier call's records, whose cases are then not profiled again;
#     CASE_ARGS adds `tessera profile` arguments to these passes (e.g. "--sources sta-hv768-b64": only that source's
#     cases, counted by CASE_PASSES); with CASE_IDS=<file> (case ids, one a line: `tessera profile --case-ids`,
#     docs/selection.md; e.g. bench/pick_cases.py's output), one more pass after those profiles exactly the cases it
#     names (whole requests included) into the same file, same plans, reps, PROFILE_END and resume (cases already in
#     the file are skipped; FAMILIES and CASE_ARGS do not apply);
#  7. with WHOLE_PASSES (same form): `tessera profile --whole-requests` (every head of the cases' layers) of FAMILIES,
#     same plans, until PROFILE_END -> $OUT/profile_whole.jsonl.gz; RESUME_WHOLE=<.jsonl.gz> seeds it as RESUME_CASES
#     does the cases' file.
# bench/merge_profile_records.py then puts the new records after the older ones (a re-profiled case replaces its old
# records whole, so no case mixes two runs' timings), and `tessera compile-table` recompiles (docs/selection.md).
# Usage on the GPU machine: OUT=... [TESTS=...] [SAN_FILTER=...] [NCU_FAMILIES=... NCU_ENTRIES=...] [PLANS=...]
#   [GENERIC_END=300 (0: no generic masks)] [GENERIC_MATCH=regex] [FAMILIES="..."] [CASE_PASSES="..."] [CASE_ARGS="..."]
#   [RESUME_CASES=...] [CASE_IDS=file]
#   [WHOLE_PASSES="..."] [RESUME_WHOLE=...]
#   [PROFILE_END=580] bench/run_table_inputs_gpu.sh
# Carry [".deps", ".revision"] (or .deps/root and .deps/python/nanobind*).
set -uo pipefail
CASE_IDS="${CASE_IDS:+$(realpath -- "$CASE_IDS")}"  # relative to where the script is started, not the repository
[ -z "$CASE_IDS" ] || [ -f "$CASE_IDS" ] || { echo "CASE_IDS: no file '$CASE_IDS'" >&2; exit 2; }  # before the build
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"; L="$OUT/logs"; mkdir -p "$L"
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
. bench/gpu_steps.sh
export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
T=build/gpu/tests/tessera_tests_gpu
B=build/gpu/bin
PLANS="${PLANS:-\.wgmma\.}"
M=/tmp/generic_masks
python3 bench/generic_masks.py --out "$M" > "$L/generic_masks.log" 2>&1 &
GEN=$!
OUT="$L" scripts/gpu_check.sh -j 16 -R '^none$' > "$L/gpu_check.log" 2>&1
stamp "build rc=$? ($(grep 'gpu build' "$L/gpu_check.log"))"; grep -E "rror" "$L/gpu_check.log" | head -5
if [ "${TESTS:-}" != none ]; then
  timeout 200 "$T" --gtest_filter="${TESTS:-PtxSm90*:*MmaAttention*wgmma*}" > "$L/kernel_tests.log" 2>&1
  stamp "kernel tests rc=$?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$L/kernel_tests.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$L/kernel_tests.log" | head -10
fi
[ -n "${SAN_FILTER:-}" ] && sanitize "$T" "$SAN_FILTER" "$L" "${SAN_TIMEOUT:-100}"
if [ -n "${NCU_FAMILIES:-}" ]; then  # where the named kernels' cycles go
  timeout 120 ncu --clock-control none --kernel-name regex:attention_kernel --launch-count "${NCU_LAUNCHES:-4}" \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats --section Occupancy --csv --page raw \
    $B/bench_mma_attention --families "$NCU_FAMILIES" --entries "${NCU_ENTRIES:-^wgmma\.bf16\.d128\.t64x64\.}" \
    --reps 1 --out /tmp/tessera_ncu --data /tmp/tessera_ncu_data > "$OUT/ncu_details.csv" 2> "$L/ncu.err"
  stamp "ncu rc=$? ($(grep -c '^"' "$OUT/ncu_details.csv") csv lines)"; rm -rf /tmp/tessera_ncu_data
  python3 bench/ncu_summary.py "$OUT/ncu_details.csv" > "$L/ncu_summary.txt" 2>&1 && cut -c1-400 "$L/ncu_summary.txt" | head -8
fi
wait $GEN; stamp "generic masks rc=$? ($(ls "$M" | wc -l) files)"
if [ -n "${GENERIC_MATCH:-}" ]; then
  for f in "$M"/*; do basename "$f" | grep -Eq -- "$GENERIC_MATCH" || rm -f "$f"; done
  stamp "GENERIC_MATCH='$GENERIC_MATCH' keeps $(ls "$M" | wc -l) files"
fi
PG="$OUT/profile_generic.jsonl"
left=$(( T0 + ${GENERIC_END:-300} - $(date +%s) ))
if [ "$left" -gt 15 ]; then
  timeout "$left" $B/tessera profile --masks "$M" --out "$PG" --reps 3 --splits profiling evaluation --plans "$PLANS" \
    > "$L/profile_generic.log" 2>&1
  stamp "profile --masks rc=$? ($(cat "$PG" 2>/dev/null | wc -l) records)"
fi
PC="$OUT/profile_cases.jsonl"
[ -n "${RESUME_CASES:-}" ] && gunzip -c "$RESUME_CASES" > "$PC"
END=$(( T0 + ${PROFILE_END:-580} ))
profile_passes "$PC" "$L/profile_cases.log" "$END" "${CASE_PASSES:-}" --plans "$PLANS" ${CASE_ARGS:-}
left=$(( END - $(date +%s) ))
if [ -n "${CASE_IDS:-}" ] && [ "$left" -gt 15 ]; then  # as a CASE_PASSES pass, the cases named by the file
  timeout "$left" $B/tessera profile --out "$PC" --reps 3 --case-ids "$CASE_IDS" --plans "$PLANS" \
    >> "$L/profile_cases.log" 2>&1
  stamp "profile $(basename "$PC") --case-ids $(basename "$CASE_IDS") rc=$? ($(cat "$PC" 2>/dev/null | wc -l) records)"
fi
PW="$OUT/profile_whole.jsonl"
[ -n "${RESUME_WHOLE:-}" ] && gunzip -c "$RESUME_WHOLE" > "$PW"
profile_passes "$PW" "$L/profile_whole.log" "$END" "${WHOLE_PASSES:-}" --plans "$PLANS" --whole-requests
grep -h -c invalid "$L"/profile_*.log 2>/dev/null
for f in "$PG" "$PC" "$PW"; do [ -f "$f" ] && gzip -f "$f"; done
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$L"
