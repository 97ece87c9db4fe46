#!/usr/bin/env bash
# tessera.distributed.ulysses_attention on the GPU machine (issue 22; bench/distributed/run.py), one command:
#   scripts/gpu_distributed.sh [smoke|timing|all] [run.py options...]
# smoke  (any machine, one GPU is enough): the NCCL path in a world of 1 (bit-for-bit checks against the direct call,
#        an error raised on every rank), then the workloads timed at world size 1 (the wrapper's cost over the direct
#        call: an all-to-all with itself and the copies).
# timing (several GPUs): the workloads at world sizes 2 and 4 (those the machine has), balance "tiles" and "even",
#        against one GPU; needs the multi-GPU kinds (nvidia-h200-x2 / -x4).
# all    (default): smoke, then timing when more than one GPU is visible.
# Needs Tessera's Python module built there (build/gpu/python: scripts/gpu_check.sh; built here first when missing,
# with its GPU tests) and the image's torch with NCCL. Results: ${OUT:-out}/distributed/distributed_w<W>.json,
# smoke.log, timing_w<W>.log; to commit them copy the JSON into bench/results/distributed/.
# NVLink SHARP (NVLS) multicast stays off: the machines' KINDS.md asks for it (NCCL_NVLS_ENABLE=0 and the two below).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT="${OUT:-$PWD/out}"
DEST="$OUT/distributed"
mkdir -p "$DEST"
MODE="${1:-all}"; [ $# -gt 0 ] && shift
case "$MODE" in smoke|timing|all) ;; *) echo "gpu_distributed: the first argument is smoke, timing or all, got '$MODE'" >&2; exit 2;; esac
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD/python:$PWD/build/gpu/python${PYTHONPATH:+:$PYTHONPATH}"
TESSERA_REVISION="$(cat .revision 2>/dev/null || echo unknown)"
export TESSERA_REVISION
if ! compgen -G "build/gpu/python/tessera/_C*.so" > /dev/null; then
  echo "gpu_distributed: build/gpu/python/tessera missing: building with scripts/gpu_check.sh (python tests only)"
  scripts/gpu_check.sh -R python || echo "gpu_distributed: gpu_check rc=$? (continuing if the module exists)"
fi
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
echo "gpu_distributed: $NGPU GPU(s), revision $TESSERA_REVISION, mode $MODE"
rc=0
run() {  # run WORLD LOG TIMEOUT args...
  local w=$1 log=$2 limit=$3; shift 3
  timeout -k 10 "$limit" python3 -m torch.distributed.run --standalone --nproc-per-node "$w" \
    bench/distributed/run.py --out "$DEST" "$@" > "$DEST/$log" 2>&1
  local r=$?
  grep -v -E "Warning|warn\(|^W[0-9]{4} " "$DEST/$log" | tail -40
  echo "gpu_distributed: world $w rc=$r"
  [ $r -eq 0 ] || rc=$r
}
if [ "$MODE" = smoke ] || [ "$MODE" = all ]; then
  run 1 smoke.log 240 --smoke "$@"
  run 1 timing_w1.log 240 --reps 5 "$@"
fi
if [ "$MODE" = timing ] || { [ "$MODE" = all ] && [ "$NGPU" -gt 1 ]; }; then
  for w in 2 4; do
    [ "$w" -le "$NGPU" ] || { echo "gpu_distributed: world $w skipped: $NGPU GPU(s) visible"; continue; }
    run "$w" "timing_w$w.log" 420 "$@"
  done
fi
echo "gpu_distributed: rc=$rc; results in $DEST"
exit $rc
