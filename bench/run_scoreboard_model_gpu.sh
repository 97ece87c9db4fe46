#!/usr/bin/env bash
# One device call for the scoreboard and the model loop together (when the device budget allows one call only):
# the gpu-preset build (every entry, tests included) with FlashInfer's FA3 JIT in the background, then
# scripts/gpu_peers.sh within PEERS_SECONDS (options PEERS_ARGS) and scripts/gpu_model.sh within MODEL_SECONDS
# (options MODEL_ARGS; MODEL=0 skips it), both reusing the build and the JIT cache. Carry [".deps", ".whl", ".revision"] (~65 MB).
# Outputs: $OUT/peers.tgz, $OUT/model.tgz, $OUT/build_logs.tgz (tar files: a device call returns at most 8 files, and
# the two scripts write 6 each; session 11's first use lost the peers JSON that way).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT/build"
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
. scripts/peer_site.sh
peer_site scoreboard "$OUT/build/pip.log"
fi_jit_start "$OUT/build/fi_jit.log"
JIT=$!
# CHECK_ARGS: ctest arguments for the build step (default: no tests; "-L gpu" runs the GPU suite on the same build).
OUT="$OUT/build" scripts/gpu_check.sh ${CHECK_ARGS:--R ^none\$} > "$OUT/build/gpu_check.log" 2>&1
stamp "build+check rc=$? ($(grep 'gpu build' "$OUT/build/gpu_check.log"); $(grep -E 'tests passed|tests failed' "$OUT/build/gpu_check.log"))"
wait $JIT; stamp "flashinfer jit rc=$? $(grep -o '"s": [0-9.]*' "$OUT/build/fi_jit.log" | tail -1)"
PEERS_SECONDS="${PEERS_SECONDS:-130}" scripts/gpu_peers.sh ${PEERS_ARGS:---quick --workloads families,sta,wan} \
  > "$OUT/build/peers_console.log" 2>&1
stamp "peers rc=$?"; grep -v -i warn "$OUT/build/peers_console.log" | tail -40 | cut -c1-160
if [ "${MODEL:-1}" = 1 ]; then  # MODEL=0: the scoreboard alone
  MODEL_SECONDS="${MODEL_SECONDS:-160}" scripts/gpu_model.sh ${MODEL_ARGS:-} > "$OUT/build/model_console.log" 2>&1
  stamp "model rc=$?"; grep -v -i warn "$OUT/build/model_console.log" | tail -30 | cut -c1-160
fi
for d in peers model; do [ -d "$OUT/$d" ] && tar czf "$OUT/$d.tgz" -C "$OUT" "$d" && rm -rf "${OUT:?}/$d"; done
tar czf "$OUT/build_logs.tgz" -C "$OUT" build && rm -rf "$OUT/build"
