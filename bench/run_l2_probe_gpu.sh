#!/usr/bin/env bash
# One device call (session 22): the TMA L2 -> shared-memory ceiling (bench_l2_tma) beside the packed s1 plans that the
# small families select (bench_mma_attention), with Nsight Compute's memory counters on both, so that the L2 reading
# of bench/NOTES.md ("Session 22") can be checked: are the t64x128.s1 plans at the ceiling TMA alone reaches?
# Usage on the GPU machine: OUT=... bench/run_l2_probe_gpu.sh   (carry .deps/root, .revision); ~3-4 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"; L="$OUT/logs"; mkdir -p "$L"
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
DEPS="$PWD/.deps/root/usr"
export LD_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
NVCC="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
ENTRIES='^wgmma\.bf16\.d128\.t(64x128|128x128)\.'
{ cmake --preset gpu -G Ninja -DCMAKE_PREFIX_PATH="$DEPS" -DTESSERA_KERNEL_FILTER="$ENTRIES" \
    -DCMAKE_CUDA_COMPILER="$NVCC" -DTESSERA_BUILD_PYTHON=OFF &&
  cmake --build --preset gpu -j 16 --target bench_l2_tma bench_mma_attention; } > "$L/build.log" 2>&1
stamp "build rc=$?"; tail -2 "$L/build.log"
B=build/gpu/bin
timeout 200 $B/bench_l2_tma --out "$OUT" > "$L/l2_tma.log" 2>&1; stamp "bench_l2_tma rc=$?"; cat "$L/l2_tma.log"
timeout 200 $B/bench_mma_attention --out "$OUT/mma" --data /tmp/tessera_mma --families Q16K16,Q32K16,Q32K32,Q64K32,Q128K128 \
  --entries "$ENTRIES" > "$L/mma.log" 2>&1; stamp "bench_mma_attention rc=$?"; grep -E "TFLOP|rror" "$L/mma.log" | cut -c1-120 | head -60
SEC="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy"
timeout 120 ncu --clock-control none --kernel-name regex:stream_kernel --launch-count 2 $SEC --csv --page raw \
  $B/bench_l2_tma --loads 400 --config 32,3,2,4 --out /tmp/ncu_l2 > "$OUT/ncu_l2_tma.csv" 2> "$L/ncu_l2.err"
stamp "ncu l2 rc=$?"
timeout 200 ncu --clock-control none --kernel-name regex:attention_kernel --launch-count 6 $SEC --csv --page raw \
  $B/bench_mma_attention --families Q32K32,Q128K128 --entries '^wgmma\.bf16\.d128\.t(64x128\.w8\.s1|128x128)' --reps 1 \
  --out /tmp/ncu_mma --data /tmp/ncu_mma_data > "$OUT/ncu_attention.csv" 2> "$L/ncu_mma.err"
stamp "ncu attention rc=$?"
python3 - "$OUT/ncu_l2_tma.csv" "$OUT/ncu_attention.csv" <<'PY' 2>&1 | head -40
import csv, sys
for f in sys.argv[1:]:
    rows = list(csv.reader(open(f)))
    if len(rows) < 3: print(f, "no rows"); continue
    h = rows[0]
    want = [i for i, n in enumerate(h) if any(k in n for k in ("Kernel Name", "lts__t_bytes.sum.per_second", "lts__throughput.avg.pct", "l1tex__m_xbar2l1tex", "gpu__time_duration.sum", "dram__throughput.avg.pct", "lts__t_sector_hit_rate"))]
    print(f); print([h[i] for i in want])
    for r in rows[2:]: print([r[i][:40] for i in want])
PY
tar czf "$OUT/logs.tgz" -C "$OUT" logs
