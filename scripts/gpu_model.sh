#!/usr/bin/env bash
# The model-level run (issue 20; bench/model/README.md) on the GPU machine, one call of at most ~8 minutes:
#   scripts/gpu_model.sh [bench/model/run.py options...]      e.g. scripts/gpu_model.sh --config wan1.3b-720p
# Carry (64 MiB in all; the work tree ~12 MiB, .whl ~42.5 MiB, the build's slice of .deps ~6 MiB: ~60 MiB):
#   [".whl", ".revision", ".deps/root/usr/include", ".deps/root/usr/lib", ".deps/root/usr/share/cmake",
#    ".deps/python/nanobind"]
# (or [".whl", ".revision", ".deps"] with the trimmed .deps of scripts/stage_gpu_deps.sh since 151d99f: ~62 MiB)
# (.whl from scripts/stage_peer_wheels.sh: FlashInfer 0.7.4 + apache-tvm-ffi + diffusers 0.36.0; .deps from
# scripts/gpu_prepare.sh, which also writes .revision.)
# Phases (each stamped): the wheels into /tmp/peers_site (scripts/peer_site.sh, shared with gpu_peers.sh);
# FlashInfer's FA3 module JIT (~95-105 s cold, seconds when cached in /tmp/peers_flashinfer) in the background
# while Tessera's Python module builds (build/gpu, target tessera_python, -j16; a fresh configure turns the tests and
# benchmarks off so that GTest and Google Benchmark are not needed; a warm build/gpu is reused as it is: ~60-120 s
# cold with every kernel entry, seconds warm); then bench/model/run.py with the time that is left (MODEL_SECONDS,
# default 460 s for the whole script, minus what the phases before took and a 25 s margin), then the report.
# Expected on one H200, cold machine, Wan2.1-14B 720p (40 layers, 3 measured steps): wheels ~15 s, build || JIT
# ~120 s, run ~150-200 s (model build ~20 s; per backend step 0 + 3 steps: Tessera ~15 s, Flex ~25 s,
# FlashInfer ~30 s, dense ~45 s), report ~5 s: ~5-6 minutes. Outputs under ${OUT:-out}/model: latest.json and
# <date>_<revision>.json, RESULTS.md, step_time.png, run.log, logs.tgz (pip, configure, build, JIT, report logs).
# Exit status: run.py's, or the report's when run.py succeeded (a report that fails is a failed call).
# Knobs: MODEL_SECONDS (460), MODEL_ARGS (extra run.py options, also taken from the command line),
# TESSERA_KERNEL_FILTER (a fresh configure only; default every entry: the runtime's plan table expects them).
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
OUT="${OUT:-$PWD/out}"
DEST="$OUT/model"
LOGS="$DEST/logs"
mkdir -p "$DEST" "$LOGS"
BUDGET="${MODEL_SECONDS:-460}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used,memory.total --format=csv \
  > "$LOGS/gpu.txt" 2>&1
REV="$(cat .revision 2>/dev/null || git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
stamp "gpu_model: revision $REV, budget $BUDGET s; $(tail -1 "$LOGS/gpu.txt")"

# 1. Wheels (FlashInfer, apache-tvm-ffi, diffusers) and FlashInfer's JIT environment.
. scripts/peer_site.sh
peer_site gpu_model "$LOGS/pip.log"
python3 -c "import diffusers, flashinfer; print('diffusers', diffusers.__version__, 'flashinfer', flashinfer.__version__)" \
  2>&1 | grep -v -i warn | tail -2
stamp "wheels"

# 2. FlashInfer's JIT build in the background (bounded), while Tessera builds.
fi_jit_start "$LOGS/fi_jit.log" 300 280
JIT_PID=$!

# 3. Tessera's Python module (the gpu preset's build tree).
DEPS="$PWD/.deps/root/usr"
export LD_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD/.deps/python"   # nanobind (after the image's packages)
if [ ! -f build/gpu/CMakeCache.txt ]; then
  cmake --preset gpu -G Ninja -DCMAKE_PREFIX_PATH="$DEPS" \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" \
    -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF -DTESSERA_KERNEL_FILTER="${TESSERA_KERNEL_FILTER:-.*}" \
    -DTESSERA_REVISION_OVERRIDE="$REV" > "$LOGS/configure.log" 2>&1 \
    || { stamp "configure failed:"; tail -30 "$LOGS/configure.log"; }
fi
cmake --build --preset gpu -j 16 --target tessera_python > "$LOGS/build.log" 2>&1 \
  || { stamp "build failed:"; grep -E "error|Error" "$LOGS/build.log" | head -30; }
stamp "tessera build ($(ls build/gpu/python/tessera/_C*.so 2>/dev/null || echo 'no module'))"
export PYTHONPATH="$PWD/python:$PWD/build/gpu/python:$PYTHONPATH"

# 4. Wait for the JIT (run.py would otherwise start a second build).
wait "$JIT_PID"; stamp "flashinfer jit rc=$? $(grep -o '"s": [0-9.]*' "$LOGS/fi_jit.log" | tail -1)"
if grep -q "did not finish" "$LOGS/fi_jit.log"; then
  # A JIT cut off by its timeout leaves nvcc running (ninja starts its commands in their own process groups, out of
  # reach of the harness's killpg): end those compiles of this workspace, by their ids, before measuring.
  for p in $(ps -eo pid=,args= | W="$FLASHINFER_WORKSPACE_BASE/.cache" awk 'index($0, ENVIRON["W"]) {print $1}'); do
    kill -9 "$p" 2>/dev/null
  done
fi
tail -3 "$LOGS/fi_jit.log" | grep -v -i warn | cut -c1-300

# 5. The loop, with what is left of the budget.
LEFT=$(( BUDGET - ($(date +%s) - T0) - 25 ))
(( LEFT < 60 )) && LEFT=60
stamp "run.py --seconds $LEFT"
# (--fi-jit-timeout 20: the module is built by now, or its JIT did not finish in time and FlashInfer's row says so)
timeout -k 10 $(( LEFT + 40 )) python3 bench/model/run.py --out "$DEST" --seconds "$LEFT" --revision "$REV" \
  --tessera-module-dir "$PWD/build/gpu/python" --fi-jit-timeout 20 ${MODEL_ARGS:-} "$@" 2>&1 | tee "$DEST/run.log" \
  | grep -v -E "Warning|warn\(|^ *warnings.warn" | tail -50
rc=${PIPESTATUS[0]}
stamp "run rc=$rc"

# 6. Report (the JSON is rewritten after every backend, so a killed run still has one). A failed report (or no JSON
# to report on) makes the script fail too: run.py's status if that is non-zero, else the report's.
report_rc=0
if [ -f "$DEST/latest.json" ]; then
  python3 bench/model/report.py "$DEST/latest.json" > "$LOGS/report.log" 2>&1 || report_rc=$?
  (( report_rc != 0 )) && { stamp "report failed (rc=$report_rc):"; tail -5 "$LOGS/report.log"; }
else
  report_rc=1
  stamp "report: no $DEST/latest.json"
fi
tar czf "$DEST/logs.tgz" -C "$DEST" logs && rm -rf "$LOGS"
(( rc == 0 )) && rc=$report_rc
stamp "gpu_model: rc=$rc (report rc=$report_rc); results in $DEST"
exit $rc
