#!/usr/bin/env bash
# One device call that re-profiles the plan table with both kernel families: build, the wgmma reference tests, the
# kernel benchmark (mma and wgmma candidates, no Wan geometry), then `tessera profile` in resumable passes within
# PROFILE_SECONDS: STA_CASES real STA cases per split, EVAL_CASES per family in the evaluation split, then the
# profiling split up to CASES per family. Returns $OUT/profile.jsonl (compile it with `tessera compile-table` on the
# CPU machine), the benchmark JSON and $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT"
L="$OUT/logs"; mkdir -p "$L"
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
OUT="$L" scripts/gpu_check.sh -j 16 -R "${TESTS:-PtxSm90|wgmma}"
stamp "gpu_check rc=$?"
B=build/gpu/bin
timeout 120 $B/bench_mma_attention --out "$OUT" --data /tmp/tessera_bench --no-wan > "$L/bench_mma_attention.log" 2>&1
stamp "bench rc=$?"; grep -E "wg" "$L/bench_mma_attention.log" | cut -c20- | head -40
P_END=$(( $(date +%s) + ${PROFILE_SECONDS:-300} ))
left() { echo $(( P_END - $(date +%s) > 1 ? P_END - $(date +%s) : 1 )); }
prof() { timeout "$(left)" $B/tessera profile --out "$OUT/profile.jsonl" --reps "${REPS:-3}" "$@" >> "$L/profile.log" 2>&1; }
FAMS="Q16K16 Q32K16 Q32K32 Q64K32 Q64K64-HD Q64K64 Q64K64-DD Q128K64 Q128K128"
prof --families STA-real --cases-per-split "${STA_CASES:-3}"; stamp "sta rc=$?"
prof --families $FAMS --splits evaluation --cases-per-split "${EVAL_CASES:-8}"; stamp "eval rc=$?"
prof --families $FAMS --splits profiling --cases-per-split "${CASES:-40}"; stamp "profiling rc=$?"
stamp "profile: $(wc -l < "$OUT/profile.jsonl") records"; tail -3 "$L/profile.log"
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$L"
