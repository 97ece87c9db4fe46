#!/usr/bin/env bash
# Recompiles the embedded sm90a plan table (src/core/plan_tables/sm90a.json) from the record files that
# src/core/plan_tables/sm90a.inputs lists (merged by bench/merge_profile_records.py: a case profiled again replaces
# its older records whole), with `tessera compile-table --min-leaf 4`. CPU only, seconds.
# Usage: [TESSERA=build/ci/bin/tessera] [LOGS=dir] bench/compile_embedded_table.sh [extra record files...]
#   extra files are appended after the listed ones (e.g. a profile just taken, before it is listed).
# Writes the table, and in $LOGS (default /tmp/tessera_table) compile_table.log and eval_report.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
TESSERA="${TESSERA:-build/ci/bin/tessera}"
LOGS="${LOGS:-/tmp/tessera_table}"; mkdir -p "$LOGS"
mapfile -t inputs < <(grep -v -E '^\s*(#|$)' src/core/plan_tables/sm90a.inputs)
python3 bench/merge_profile_records.py "$LOGS/all.jsonl" "${inputs[@]}" "$@" 2> "$LOGS/merge.log"
"$TESSERA" compile-table --in "$LOGS/all.jsonl" --out src/core/plan_tables/sm90a.json --gpu-name "NVIDIA H200" \
  --min-leaf 4 --eval-report "$LOGS/eval_report.csv" > "$LOGS/compile_table.log" 2>&1
rm -f "$LOGS/all.jsonl"
tail -3 "$LOGS/compile_table.log"
