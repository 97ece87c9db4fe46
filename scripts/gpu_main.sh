#!/usr/bin/env bash
# One GPU-machine session of the whole pipeline, in phases with time limits (logs and JSON under $OUT):
#   build + all GPU tests (scripts/gpu_check.sh), memcheck on a subset, the kernel benchmark against
#   FlexAttention, the launch-preparation benchmark, `tessera profile` on corpus cases, `tessera compile-table`, a rebuild with the new table
#   embedded, and the main job `tessera run`.
# Knobs: PROFILE_CASES, PROFILE_EVAL_CASES, PROFILE_STA_CASES, PROFILE_SECONDS, PROFILE_REPS, PROFILE_RESUME (see the
# profile phase), RUN_CASES (per family), RUN_SECONDS, MEMCHECK (0 skips it), MEMCHECK_FILTER,
# RACECHECK_FILTER (racecheck runs only when set), PHASES (subset of the phase names).
# Opt-in phase `peers` (not in the default PHASES; carry ".whl" from scripts/stage_peer_wheels.sh): the peer
# scoreboard, scripts/gpu_peers.sh with PEERS_SECONDS (default 300 here) and PEERS_ARGS (run.py options), results
# under $OUT/peers. Alone (PHASES=peers) it still runs gpu_check.sh's build, a no-op on a warm machine.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT"
PHASES="${PHASES:-test bench prep profile run}"
has() { [[ " $PHASES " == *" $1 "* ]]; }
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
scripts/gpu_check.sh $(has test || echo "-R ^none$") ; stamp "gpu_check rc=$?"
B=build/gpu/bin
if has test && [ "${MEMCHECK:-1}" = 1 ]; then
  timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 build/gpu/tests/tessera_tests_gpu \
    --gtest_filter="${MEMCHECK_FILTER:-LaunchPrepGpu.Wan*:Catalog/MmaAttention.*/mma_bf16_d128_t64x64_w4_s2}" > "$OUT/memcheck.log" 2>&1
  stamp "memcheck rc=$?"; tail -2 "$OUT/memcheck.log"
  if [ -n "${RACECHECK_FILTER:-}" ]; then
    timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 build/gpu/tests/tessera_tests_gpu \
      --gtest_filter="$RACECHECK_FILTER" > "$OUT/racecheck.log" 2>&1
    stamp "racecheck rc=$?"; tail -2 "$OUT/racecheck.log"
  fi
fi
if has bench; then
  timeout 150 $B/bench_mma_attention --out "$OUT" --data /tmp/tessera_bench > "$OUT/bench_mma_attention.log" 2>&1
  timeout 120 python3 bench/flex_vs_tessera.py --tessera "$OUT/tessera_mma_bench.json" --data /tmp/tessera_bench \
    --out "$OUT/flex_vs_tessera.json" > "$OUT/flex.log" 2>&1
  stamp "bench rc=$?"; grep -v Warning "$OUT/flex.log" | tail -16
fi
if has prep; then
  nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$OUT/clocks.txt" 2>&1
  timeout 60 $B/bench_launch_prep --out "$OUT" > "$OUT/bench_launch_prep.log" 2>&1; stamp "prep bench rc=$?"
  tail -24 "$OUT/bench_launch_prep.log"
  timeout 60 $B/bench_mask_state --out "$OUT" > "$OUT/bench_mask_state.log" 2>&1; stamp "mask state bench rc=$?"
  tail -8 "$OUT/bench_mask_state.log"
fi
if has profile; then
  # One records file, filled in three resumable passes within PROFILE_SECONDS: PROFILE_STA_CASES real STA cases
  # per split, PROFILE_EVAL_CASES per family of PROFILE_FAMILIES in both splits (so the evaluation split is there),
  # then the profiling split up to PROFILE_CASES per family. PROFILE_RESUME: an earlier records file to continue.
  [ -n "${PROFILE_RESUME:-}" ] && cp "$PROFILE_RESUME" "$OUT/profile.jsonl"
  P_END=$(( $(date +%s) + ${PROFILE_SECONDS:-170} ))
  left() { echo $(( P_END - $(date +%s) > 1 ? P_END - $(date +%s) : 1 )); }
  prof() { timeout "$(left)" $B/tessera profile --out "$OUT/profile.jsonl" --reps "${PROFILE_REPS:-3}" "$@" >> "$OUT/profile.log" 2>&1; }
  # The real STA cases cost 8-22 s each on the H200 (115,200 tokens, 24 heads), the others about 0.4 s.
  FAMS="${PROFILE_FAMILIES:-Q16K16 Q32K16 Q32K32 Q64K32 Q64K64-HD Q64K64 Q64K64-DD Q128K64 Q128K128}"
  prof --families STA-real --cases-per-split "${PROFILE_STA_CASES:-4}"
  prof --families $FAMS --cases-per-split "${PROFILE_EVAL_CASES:-4}"
  prof --families $FAMS --splits profiling --cases-per-split "${PROFILE_CASES:-2}"
  stamp "profile rc=$? ($(wc -l < "$OUT/profile.jsonl") records)"; tail -3 "$OUT/profile.log"
  $B/tessera compile-table --in "$OUT/profile.jsonl" --out src/core/plan_tables/sm90a.json --gpu-name "NVIDIA H200" \
    | tee "$OUT/compile_table.log"
  cp src/core/plan_tables/sm90a.json "$OUT/sm90a.json"
  cmake --build --preset gpu -j 16 --target tessera_cli > "$OUT/rebuild.log" 2>&1; stamp "rebuild rc=$?"
fi
if has run; then
  timeout "${RUN_SECONDS:-150}" $B/tessera run --cases-per-family "${RUN_CASES:-1}" --json "$OUT/tessera_run.json" > "$OUT/tessera_run.log" 2>&1
  stamp "run rc=$?"; tail -16 "$OUT/tessera_run.log"
fi
if has peers; then
  PEERS_SECONDS="${PEERS_SECONDS:-300}" scripts/gpu_peers.sh ${PEERS_ARGS:-} > "$OUT/peers.log" 2>&1
  stamp "peers rc=$?"; tail -20 "$OUT/peers.log"
fi
if has python && [ -d python/tests ]; then
  PYTHONPATH="$PWD/build/gpu/python:$PWD/python" timeout 120 python3 -m pytest -q python/tests > "$OUT/pytest.log" 2>&1
  stamp "pytest rc=$?"; tail -15 "$OUT/pytest.log"
fi
# The device tool returns at most 8 files: pack everything into one archive (plus the small summary logs).
tar czf /tmp/all.tgz -C "$OUT" . && mv /tmp/all.tgz "$OUT/all.tgz"
find "$OUT" -maxdepth 1 -type f ! -name all.tgz ! -name compile_table.log ! -name flex.log ! -name ctest.log -delete
