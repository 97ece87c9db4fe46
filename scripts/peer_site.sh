# Sourced by scripts/gpu_peers.sh and scripts/gpu_model.sh on the GPU machine (bash): installs the wheels staged by
# scripts/stage_peer_wheels.sh (.whl: FlashInfer, apache-tvm-ffi, diffusers) into $PEERS_SITE (default
# /tmp/peers_site; reinstalled only when .whl changes), puts it first on PYTHONPATH, and sets FlashInfer's JIT
# environment (its module cache in $FLASHINFER_WORKSPACE_BASE persists while the machine stays warm, so a second
# call skips the ~100 s JIT build). Usage: peer_site TAG LOG   (TAG prefixes messages, LOG receives pip's output)
peer_site() {
  local tag="$1" log="$2"
  SITE="${PEERS_SITE:-/tmp/peers_site}"
  if compgen -G ".whl/*.whl" > /dev/null; then
    if [ ! -f "$SITE/.installed" ] || [ "$(cat "$SITE/.installed")" != "$(ls -l .whl/*.whl | md5sum)" ]; then
      rm -rf "$SITE"
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
        > "$log" 2>&1 && ls -l .whl/*.whl | md5sum > "$SITE/.installed" \
        || { echo "$tag: wheel install failed:"; tail -5 "$log"; }
    fi
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
  else
    echo "$tag: no .whl/*.whl (scripts/stage_peer_wheels.sh, carry .whl): FlashInfer (and diffusers) will be missing"
  fi
  export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
  export FLASHINFER_CUDA_ARCH_LIST="${FLASHINFER_CUDA_ARCH_LIST:-9.0a}"
  export MAX_JOBS="${MAX_JOBS:-16}"
  export FLASHINFER_WORKSPACE_BASE="${FLASHINFER_WORKSPACE_BASE:-/tmp/peers_flashinfer}"
  export PATH="$CUDA_HOME/bin:$PATH"
  mkdir -p "$FLASHINFER_WORKSPACE_BASE"
}

# FlashInfer's JIT build of the scoreboard's module in the background, bounded (after peer_site): the module lands in
# $FLASHINFER_WORKSPACE_BASE, so the peers or the model loop that follow load it instead of building it. The caller
# waits on $! (the background job this starts). Usage: fi_jit_start LOG [BOUND_S (240)] [JIT_TIMEOUT_S (BOUND_S - 10)]
fi_jit_start() {
  local log="$1" bound="${2:-240}"
  timeout -k 10 "$bound" python3 bench/model/run.py --flashinfer-jit-only --fi-jit-timeout "${3:-$((bound - 10))}" \
    > "$log" 2>&1 &
}
