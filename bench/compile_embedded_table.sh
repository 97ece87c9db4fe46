#!/usr/bin/env bash
# Recompiles the embedded sm90a plan table (src/core/plan_tables/sm90a.json) from the record files that
# src/core/plan_tables/sm90a.inputs lists (merged by bench/merge_profile_records.py: a case profiled again replaces
# its older records whole), with `tessera compile-table --min-leaf 4`. CPU only, seconds.
# Usage: [TESSERA=build/ci/bin/tessera] [LOGS=dir] bench/compile_embedded_table.sh [extra record files...]
#   extra files are appended after the listed ones (e.g. a profile just taken, before it is listed); they and LOGS
#   are relative to the current directory, TESSERA to the repository root. -h, --help: this text.
# Writes the table, and in $LOGS (default /tmp/tessera_table) merge.log, compile_table.log and eval_report.csv.
# On any failure: a message naming the step (and its log's last lines) on stderr, exit status non-zero, the table
# untouched (compile-table writes it only on success) and no merged file left behind.
set -euo pipefail
fail() { echo "compile_embedded_table: $1" >&2; [ -f "${2:-}" ] && tail -3 "$2" | sed 's/^/  /' >&2; exit 1; }
for a in "$@"; do
  case "$a" in
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0;;
    "") fail "an empty record file argument";;
  esac
done
extra=()  # the extra files and LOGS as absolute paths: relative ones name files of the caller's directory
for a in "$@"; do extra+=("$(realpath -m -- "$a")"); done
LOGS="$(realpath -m -- "${LOGS:-/tmp/tessera_table}")"
cd "$(dirname "$0")/.."
TESSERA="${TESSERA:-build/ci/bin/tessera}"
mkdir -p "$LOGS"
[ -x "$TESSERA" ] || fail "TESSERA=$TESSERA is not an executable (build the ci preset, or set TESSERA)"
mapfile -t inputs < <(grep -v -E '^\s*(#|$)' src/core/plan_tables/sm90a.inputs)
for f in "${inputs[@]}" "${extra[@]}"; do
  [ -d "$f" ] && fail "record file $f is a directory"
  [ -f "$f" ] || fail "record file $f does not exist"
done
rm -f "$LOGS/compile_table.log" "$LOGS/eval_report.csv"  # no stale logs of an earlier run
trap 'rm -f "$LOGS/all.jsonl"' EXIT
python3 bench/merge_profile_records.py "$LOGS/all.jsonl" "${inputs[@]}" "${extra[@]}" 2> "$LOGS/merge.log" ||
  fail "merging the record files failed ($LOGS/merge.log):" "$LOGS/merge.log"
"$TESSERA" compile-table --in "$LOGS/all.jsonl" --out src/core/plan_tables/sm90a.json --gpu-name "NVIDIA H200" \
  --min-leaf 4 --eval-report "$LOGS/eval_report.csv" > "$LOGS/compile_table.log" 2>&1 ||
  fail "tessera compile-table failed ($LOGS/compile_table.log; line numbers count the merged records, in the order of merge.log):" \
    "$LOGS/compile_table.log"
tail -3 "$LOGS/compile_table.log"
