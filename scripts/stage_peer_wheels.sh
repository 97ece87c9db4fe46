#!/usr/bin/env bash
# Stages FlashInfer for the peer scoreboard (bench/peers) and the model-level loop (bench/model) on the GPU machine,
# which reaches no package registry: downloads the flashinfer-python wheel and the one import-time dependency the GPU
# image lacks (apache-tvm-ffi; torch, numpy, requests, ninja, ... are there), for CPython 3.12 on x86-64 Linux, and
# the diffusers wheel (pure Python; the model code of bench/model: WanTransformer3DModel), into .whl/ (git-ignored).
# Wheels over 20 MiB (0.7.x: 101 MB) are trimmed by scripts/repack_flashinfer.py (0.7.4 -> ~38 MiB); diffusers
# by scripts/repack_diffusers.py (its pipelines dropped: 4.4 -> 1.4 MiB). Run here; carry ".whl" to the device;
# scripts/gpu_peers.sh and scripts/gpu_model.sh install it there. The whole of .whl must stay under 45 MiB
# (a device call carries 64 MiB with the ~12 MiB work tree; scripts/gpu_model.sh also carries ~6.5 MiB of .deps).
# Knobs: FLASHINFER_VERSION (default 0.7.4; 0.6.6 is a 7.8 MB wheel, not trimmed), TVM_FFI_VERSION (0.1.15.post2),
# DIFFUSERS_VERSION (0.36.0: its Requires-Dist allows huggingface-hub 1.x and Python 3.8+; 0.42 needs hub >= 1.32 and
# safetensors >= 0.8; empty: no diffusers), PEER_WHEELS_DIR (.whl).
set -euo pipefail
cd "$(dirname "$0")/.."
FI="${FLASHINFER_VERSION:-0.7.4}"
TVM="${TVM_FFI_VERSION:-0.1.15.post2}"
DIFFUSERS="${DIFFUSERS_VERSION-0.36.0}"
DIR="${PEER_WHEELS_DIR:-.whl}"
LIMIT_MIB=45
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
dl() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$raw" "$@"
}
dl "flashinfer-python==$FI" "apache-tvm-ffi==$TVM" ${DIFFUSERS:+"diffusers==$DIFFUSERS"}
rm -rf "$DIR" && mkdir -p "$DIR"
for w in "$raw"/*.whl; do
  if [[ "$(basename "$w")" == flashinfer_python-* ]] && (( $(stat -c %s "$w") > 20 * 1024 * 1024 )); then
    python3 scripts/repack_flashinfer.py "$w" "$DIR"
  elif [[ "$(basename "$w")" == diffusers-* ]]; then
    python3 scripts/repack_diffusers.py "$w" "$DIR"
  else
    cp "$w" "$DIR/"
  fi
done
total=$(du -cb "$DIR"/*.whl | tail -1 | cut -f1)
ls -l "$DIR"
echo "staged $(( total / 1024 / 1024 )) MiB in $DIR (flashinfer-python $FI, apache-tvm-ffi $TVM${DIFFUSERS:+, diffusers $DIFFUSERS}); carry [\"$DIR\"]"
if (( total > LIMIT_MIB * 1024 * 1024 )); then
  echo "stage_peer_wheels: error: $DIR is over $LIMIT_MIB MiB" >&2
  exit 1
fi
