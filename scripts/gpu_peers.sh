#!/usr/bin/env bash
# The peer scoreboard on the GPU machine (issue 17; bench/peers/README.md), one command:
#   scripts/gpu_peers.sh [run.py options...]        e.g. scripts/gpu_peers.sh --quick --workloads families
# Needs: Tessera's Python module built there (scripts/gpu_check.sh, the `gpu` preset: build/gpu/python), and the
# FlashInfer wheels staged here by scripts/stage_peer_wheels.sh and carried as ".whl" (without them the FlashInfer
# rows say why). Installs the wheels into /tmp/peers_site, sets FlashInfer's JIT environment (its module cache in
# /tmp/peers_flashinfer persists while the machine stays warm: a second call skips the ~104 s JIT build), then runs
# bench/peers/run.py with a time budget of PEERS_SECONDS (default 480) and writes everything under
# ${OUT:-out}/peers: <date>_<revision>.json, latest.json, RESULTS.md, tflops.png, speedup.png, run.log.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"
DEST="$OUT/peers"
mkdir -p "$DEST"
SECONDS_BUDGET="${PEERS_SECONDS:-480}"
. scripts/peer_site.sh
peer_site gpu_peers "$DEST/pip.log"
[ -d build/gpu/python/tessera ] || echo "gpu_peers: build/gpu/python/tessera missing: run scripts/gpu_check.sh first (Tessera rows will say why)"
timeout -k 10 $(( ${SECONDS_BUDGET%.*} + 60 )) python3 bench/peers/run.py --out "$DEST" --seconds "$SECONDS_BUDGET" "$@" \
  2>&1 | tee "$DEST/run.log" | grep -v -E "Warning|warn\(" | tail -60
rc=${PIPESTATUS[0]}
# A run killed before its report: the JSON is there (rewritten after every row); draw the report from it.
if [ ! -f "$DEST/RESULTS.md" ] && [ -f "$DEST/latest.json" ]; then
  python3 bench/peers/report.py "$DEST/latest.json" --md "$DEST/RESULTS.md" --charts "$DEST" || true
fi
echo "gpu_peers: rc=$rc; results in $DEST"
exit $rc
