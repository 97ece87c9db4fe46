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
SITE="${PEERS_SITE:-/tmp/peers_site}"
if compgen -G ".whl/*.whl" > /dev/null; then
  if [ ! -f "$SITE/.installed" ] || [ "$(cat "$SITE/.installed")" != "$(ls -l .whl/*.whl | md5sum)" ]; then
    rm -rf "$SITE"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
      > "$DEST/pip.log" 2>&1 && ls -l .whl/*.whl | md5sum > "$SITE/.installed" \
      || { echo "gpu_peers: wheel install failed:"; tail -5 "$DEST/pip.log"; }
  fi
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
else
  echo "gpu_peers: no .whl/*.whl (scripts/stage_peer_wheels.sh, carry .whl): FlashInfer rows will say it is missing"
fi
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
export FLASHINFER_CUDA_ARCH_LIST="${FLASHINFER_CUDA_ARCH_LIST:-9.0a}"
export MAX_JOBS="${MAX_JOBS:-16}"
export FLASHINFER_WORKSPACE_BASE="${FLASHINFER_WORKSPACE_BASE:-/tmp/peers_flashinfer}"
export PATH="$CUDA_HOME/bin:$PATH"
mkdir -p "$FLASHINFER_WORKSPACE_BASE"
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
