#!/usr/bin/env bash
# One device call that refreshes the embedded sm90a table and measures it beside the peers (session 16):
#  1. FlashInfer's JIT in the background (scripts/peer_site.sh; carry .whl);
#  2. bench/run_table_inputs_gpu.sh: build, then `tessera profile` of the generic masks when GENERIC_END (seconds after
#     its start; default 0: none) leaves time, and of the corpus cases of FAMILIES in CASE_PASSES (RESUME_CASES seeds
#     the file) and their whole requests in WHOLE_PASSES; no kernel tests;
#  3. bench/compile_embedded_table.sh with the build's tessera: the listed inputs, then EXTRA_INPUTS, then this call's
#     generic and case records -> src/core/plan_tables/sm90a.json ($OUT/table.tgz: the table, its compile log and
#     evaluation report);
#  4. bench/run_scoreboard_model_gpu.sh (an incremental build embeds the table; CHECK_ARGS, PEERS_SECONDS, PEERS_ARGS).
# Usage on the GPU machine: OUT=... FAMILIES="..." CASE_PASSES="..." [RESUME_CASES=...] [EXTRA_INPUTS="a.gz b.gz"]
#   [PROFILE_END=220] [PEERS_SECONDS=...] [PEERS_ARGS=...] bench/run_table_scoreboard_gpu.sh
# Carry [".deps/root", ".deps/python/nanobind", ".deps/python/nanobind-3.1.0.dist-info", ".whl", ".revision"].
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT/table"
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
. scripts/peer_site.sh
peer_site table "$OUT/table/pip.log"
fi_jit_start "$OUT/table/fi_jit.log"
OUT="$OUT" TESTS=none GENERIC_END="${GENERIC_END:-0}" PROFILE_END="${PROFILE_END:-220}" bench/run_table_inputs_gpu.sh
new=()  # this call's records, after the listed inputs and EXTRA_INPUTS
for f in "$OUT/profile_generic.jsonl.gz" "$OUT/profile_cases.jsonl.gz" "$OUT/profile_whole.jsonl.gz"; do [ -f "$f" ] && new+=("$f"); done
LOGS="$OUT/table" TESSERA=build/gpu/bin/tessera bench/compile_embedded_table.sh ${EXTRA_INPUTS:-} "${new[@]}"
stamp "compile-table rc=$?"
cp src/core/plan_tables/sm90a.json "$OUT/table/"
tar czf "$OUT/table.tgz" -C "$OUT" table && rm -rf "$OUT/table"
wait
bench/run_scoreboard_model_gpu.sh
stamp "done"
