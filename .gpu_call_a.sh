#!/usr/bin/env bash
# Session 6, call 3a (2463938): prep-2p merged (packed c_q > 1 single pass, run-major in final order) and the
# __syncthreads handoff: launch-prep/runtime tests, racecheck + memcheck, bench_launch_prep (auto).
set -uo pipefail
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
TESSERA_KERNEL_FILTER='t64x64\.w4\.s2' scripts/gpu_check.sh --timeout 200 -R 'LaunchPrep|Runtime'; stamp "gpu_check rc=$?"
grep -E "Failure|Expected|Which is|FAILED" -A3 $OUT/ctest.log | head -30
B=build/gpu/bin; TT=build/gpu/tests/tessera_tests_gpu
timeout 70 compute-sanitizer --tool racecheck --error-exitcode 9 $TT --gtest_filter='LaunchPrepGpu.Persistent*' > $OUT/racecheck.log 2>&1; stamp "racecheck rc=$?"; tail -3 $OUT/racecheck.log
mkdir -p $OUT/auto
timeout 60 $B/bench_launch_prep --out $OUT/auto > $OUT/auto/log 2>&1; stamp "prep auto rc=$?"; tail -26 $OUT/auto/log
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $TT --gtest_filter='LaunchPrepGpu.PackedCoarsenedQAndRunMajor*:LaunchPrepGpu.WanSized*' > $OUT/memcheck.log 2>&1; stamp "memcheck rc=$?"; tail -2 $OUT/memcheck.log
tar czf /tmp/all.tgz -C "$OUT" . && mv /tmp/all.tgz "$OUT/all.tgz"
