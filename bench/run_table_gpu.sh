#!/usr/bin/env bash
# One device call that finishes a re-profiled plan table and checks the whole project with it: build; `tessera
# profile` of the families in $FAMS (profiling split, CASES each) appended to the records carried in
# $PROF_IN (gzip JSON lines from bench/run_profile_gpu.sh); `tessera compile-table --min-leaf $MIN_LEAF` into
# src/core/plan_tables/sm90a.json; a rebuild that embeds it; the whole GPU test suite; `tessera run` (the main job).
# Returns $OUT/profile_all.jsonl.gz, $OUT/sm90a.json, $OUT/tessera_run.json and $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT"
L="$OUT/logs"; mkdir -p "$L"
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
OUT="$L" scripts/gpu_check.sh -j 16 -R '^none$' > "$L/build_phase.log" 2>&1
stamp "build rc=$?"
B=build/gpu/bin
gunzip -c "${PROF_IN:-.prof/profile_call2.jsonl.gz}" > "$OUT/profile_all.jsonl"
timeout "${PROFILE_SECONDS:-70}" $B/tessera profile --out "$OUT/profile_all.jsonl" --reps 3 --splits profiling \
  --families ${FAMS:-Q128K64 Q128K128} --cases-per-split "${CASES:-40}" > "$L/profile.log" 2>&1
stamp "profile rc=$? ($(wc -l < "$OUT/profile_all.jsonl") records)"
$B/tessera compile-table --in "$OUT/profile_all.jsonl" --out src/core/plan_tables/sm90a.json --gpu-name "NVIDIA H200" \
  --min-leaf "${MIN_LEAF:-16}" --eval-report "$L/eval_report.csv" > "$L/compile_table.log" 2>&1
stamp "compile-table rc=$?"; tail -14 "$L/compile_table.log"
cp src/core/plan_tables/sm90a.json "$OUT/sm90a.json"
gzip -f "$OUT/profile_all.jsonl"
cmake --build --preset gpu -j 16 > "$L/rebuild.log" 2>&1; stamp "rebuild rc=$?"
ctest --preset gpu -j 4 --timeout 200 --output-junit "$L/ctest.xml" > "$L/ctest.log" 2>&1
stamp "ctest rc=$?"; grep -E "tests passed|tests failed|\(Failed\)|Timeout|\*\*\*" "$L/ctest.log" | head -20
timeout "${RUN_SECONDS:-120}" $B/tessera run --cases-per-family "${RUN_CASES:-1}" --json "$OUT/tessera_run.json" > "$L/tessera_run.log" 2>&1
stamp "run rc=$?"; tail -22 "$L/tessera_run.log"
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$L"
