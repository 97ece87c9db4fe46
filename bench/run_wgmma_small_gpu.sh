#!/usr/bin/env bash
# One device call for the swapped wgmma tiles of 16- and 32-row query blocks (issue #18: Q16K16, Q32K16, Q32K32;
# src/kernels/wgmma/consumer_swap.cuh). Builds only the catalog entries it compares (TESSERA_KERNEL_FILTER: the four
# swapped entries, wgmma t64x64, and the mma tiles of the current best plans), then:
#   1. the Hopper PTX tests (stmatrix.trans, predicated shared store, swapped wgmma products) and every compiled
#      entry's reference suite (Catalog/MmaAttention: Direct, Refined, Coarsened-Q/-KV, packed with empty slots,
#      split-KV + merge; ragged N, GQA, BHSD, empty rows, LSE; fp16 via wgmma.f16.d128.t32x64, D = 64 via
#      wgmma.bf16.d64.t32x64);
#   2. the SASS summary of every wgmma kernel (HGMMA count, local-memory instructions);
#   3. compute-sanitizer memcheck (PtxSm90 + t16x64), racecheck (t32x64) and synccheck (t16x64), side by side;
#   4. the kernel benchmark on Q16K16 / Q32K16 / Q32K32 (swapped candidates `.wgs` next to today's best);
#   5. ncu (one run per candidate): time, L2 / SM / DRAM throughput of every attention kernel of the same sweep, to
#      check the L2-bandwidth prediction of bench/NOTES.md.
# Everything lands in $OUT/small_logs.tgz plus tessera_mma_bench.json. Expected: ~6 minutes on one H200.
# Usage on the GPU machine (repository root): OUT=... bench/run_wgmma_small_gpu.sh   (knobs: SAN=0, BENCH=0, NCU=0)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT"
L="$OUT/logs"; mkdir -p "$L"
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
export TESSERA_KERNEL_FILTER="${TESSERA_KERNEL_FILTER:-^(wgmma\.(bf16|f16)\.d(64|128)\.t(16|32)x64\.w8\.s2|wgmma\.bf16\.d128\.t64x64\.w8\.s2|mma\.bf16\.d128\.t(16x16\.w1|16x32\.w2|16x64\.w4|32x32\.w2|32x64\.w4)\.s2)$}"
OUT="$L" scripts/gpu_check.sh -j 16 -R "${TESTS:-PtxSm90|MmaAttention|MmaCatalog}"
stamp "gpu_check rc=$?"
grep -E "^ *[0-9]+/[0-9]+ Test|tests passed|Failed" "$L/ctest.log" | grep -v " Passed" | head -30
T=build/gpu/tests/tessera_tests_gpu
for o in build/gpu/src/kernels/CMakeFiles/tessera_kernels.dir/generated/entry_wgmma_*.o; do
  cuobjdump -sass "$o" | awk -v f="$(basename "$o")" '/Function :/ {name=$3} /HGMMA/ {h[name]++} /(LDL|STL)/ {l[name]++}
    /STSM/ {s[name]++} END {for (n in h) printf "%s %s HGMMA=%d STSM=%d LDL/STL=%d\n", f, substr(n, 1, 90), h[n], s[n] + 0, l[n] + 0}'
done > "$L/sass_summary.txt" 2>&1
stamp "sass"; cut -c1-170 "$L/sass_summary.txt" | head -20
if [ "${SAN:-1}" = 1 ]; then
  E16='Catalog/MmaAttention.*/wgmma_bf16_d128_t16x64_w8_s2' E32='Catalog/MmaAttention.*/wgmma_bf16_d128_t32x64_w8_s2'
  for run in "memcheck PtxSm90.*:$E16" "racecheck $E32" "synccheck $E16"; do  # the three at once (tiny grids)
    set -- $run
    ( timeout "${SAN_SECONDS:-75}" compute-sanitizer --tool "$1" --error-exitcode 9 $T --gtest_filter="$2" \
        > "$L/$1.log" 2>&1; echo "rc=$?" >> "$L/$1.log" ) &
  done
  wait
  for t in memcheck racecheck synccheck; do stamp "$t $(tail -1 "$L/$t.log")"; tail -3 "$L/$t.log" | head -2; done
fi
B=build/gpu/bin/bench_mma_attention DATA=/tmp/tessera_bench FAM=Q16K16,Q32K16,Q32K32
if [ "${BENCH:-1}" = 1 ]; then
  timeout 150 $B --no-wan --families $FAM --out "$OUT" --data $DATA > "$L/bench_mma_attention.log" 2>&1
  stamp "bench rc=$?"; cat "$L/bench_mma_attention.log" | cut -c1-120
fi
if [ "${NCU:-1}" = 1 ]; then
  M=gpu__time_duration.sum,lts__t_bytes.sum.per_second,lts__throughput.avg.pct_of_peak_sustained_elapsed
  M=$M,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed
  M=$M,l1tex__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second
  mkdir -p "$L/ncu_out"
  timeout 150 ncu --clock-control none --kernel-name regex:attention_kernel --metrics $M --csv \
    $B --no-wan --families $FAM --reps 1 --out "$L/ncu_out" --data $DATA > "$L/ncu.csv" 2> "$L/ncu.err"
  stamp "ncu rc=$?"
  # One row per profiled launch, in launch order (= the bench's candidate order, then the best one re-run per family).
  python3 - "$L/ncu.csv" > "$L/ncu_launches.txt" 2>&1 <<'PY'
import csv, re, sys
rows = list(csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')))
head, data = rows[0], rows[2:]
k, metric, value = head.index("Kernel Name"), head.index("Metric Name") if "Metric Name" in head else -1, -1
if metric < 0:  # --page raw layout: one row per launch, metrics as columns
    cols = [i for i, h in enumerate(head) if "__" in h]
    for r in data:
        m = re.search(r"(mma|wgmma)::attention_kernel<.*?Config<([^>]*)>, \(?[^)]*\)?(\d)", r[k])
        tag = f"{m.group(1)} {m.group(2)} v{m.group(3)}" if m else r[k][:60]
        print(tag.ljust(50), *[f"{head[i].split('.')[0][-20:]}={r[i]}" for i in cols])
else:  # --page details layout: one row per (launch, metric)
    ids = {}
    for r in rows[1:]:  # no units row in this layout
        ids.setdefault(r[head.index("ID")], [r[k], {}])[1][r[metric]] = r[head.index("Metric Value")]
    for i, (name, ms) in ids.items():
        m = re.search(r"(mma|wgmma)::attention_kernel<.*?Config<([^>]*)>, \(?[^)]*\)?(\d)", name)
        print(i.rjust(4), (f"{m.group(1)} {m.group(2)} v{m.group(3)}" if m else name[:50]).ljust(48),
              *[f"{n.split('.')[0][-18:]}={v}" for n, v in ms.items()])
PY
  head -80 "$L/ncu_launches.txt" | cut -c1-230
  grep -E "TFLOP" "$L/ncu.csv" > "$L/ncu_order.txt"  # the bench's own lines (ncu timing): which candidate ran when
fi
tar czf "$OUT/small_logs.tgz" -C "$OUT" logs && rm -rf "$L"
