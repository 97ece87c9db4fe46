#!/usr/bin/env bash
# Builds and tests Tessera on the GPU machine (H200), then runs the GPU benchmarks named in $TESSERA_BENCH.
# Dependencies come from .deps (scripts/stage_gpu_deps.sh, carried with the call). Logs and results go to
# ${OUT:-out}/. Usage on the device:  scripts/gpu_check.sh [ctest args...]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT"
DEPS="${TESSERA_DEPS:-$PWD/.deps}/root/usr"
export LD_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
# nanobind and pytest staged by stage_gpu_deps.sh, after the image's own packages (Python module and its tests).
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}${TESSERA_DEPS:-$PWD/.deps}/python"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.txt" 2>&1
{ cat .revision 2>/dev/null || git rev-parse HEAD; } > "$OUT/revision.txt" 2>/dev/null || true  # .revision: written by gpu_prepare.sh (the copy there may carry a stale .git)
start=$(date +%s)
cmake --preset gpu -G Ninja -DCMAKE_PREFIX_PATH="$DEPS" -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" \
  -DTESSERA_KERNEL_FILTER="${TESSERA_KERNEL_FILTER:-.*}" -DTESSERA_REVISION_OVERRIDE="$(cat .revision 2>/dev/null)" \
  > "$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; exit 3; }
cmake --build --preset gpu -j 16 > "$OUT/build.log" 2>&1 || { grep -E 'error|Error' "$OUT/build.log" | head -40; exit 4; }
echo "gpu build: $(( $(date +%s) - start )) s"
ctest --preset gpu -j 4 --output-junit "$OUT/ctest.xml" "$@" > "$OUT/ctest.log" 2>&1
rc=$?
grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/ctest.log" | head -40
for b in ${TESSERA_BENCH:-}; do
  echo "== bench $b"
  if [ "$b" = bench_dispatch ] || [ "$b" = bench_runtime_dispatch ]; then  # Google Benchmark: its own flags
    "build/gpu/bin/$b" --benchmark_repetitions=10 --benchmark_report_aggregates_only=true \
      --benchmark_out="$OUT/$b.json" --benchmark_out_format=json 2>&1 | tee "$OUT/$b.log" | tail -30
  else
    "build/gpu/bin/$b" --out "$OUT" 2>&1 | tee "$OUT/$b.log" | tail -30
  fi
done
exit $rc
