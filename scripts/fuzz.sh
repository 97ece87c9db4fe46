#!/usr/bin/env bash
# The libFuzzer targets of tests/fuzz (tests/fuzz/README.md): a small clang build of the host sources they need
# (preset `fuzz`, ASan + UBSan, no CUDA) in build/fuzz, kept apart from the CUDA build.
#   scripts/fuzz.sh build            configure + build the targets
#   scripts/fuzz.sh smoke [SECONDS]  build, replay the committed inputs (CTest), then fuzz each target for SECONDS
#                                    (default $TESSERA_FUZZ_SECONDS or 30) one after the other; CI runs this
#   scripts/fuzz.sh run TARGET SECONDS [libFuzzer options...]   one long run (e.g. 600 s)
#   scripts/fuzz.sh seeds            rewrite tests/fuzz/seeds from the project's own files
# A finding stops with exit 1 and leaves its input in build/fuzz/artifacts/<target>/: fix it, then copy the input
# to tests/fuzz/regressions/<target>/ (it is replayed by CTest test fuzz_replay_<target> in both builds).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${TESSERA_JOBS:-$(nproc)}"
TARGETS=(mask_file plan_table profile_records plan_id sta_table mask_state)
BIN=build/fuzz/tests/fuzz

build() {
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j "$JOBS"
}

# fuzz TARGET SECONDS [options]: fuzzes a scratch corpus seeded with the committed inputs; prints the exec count.
fuzz() {
  local t="$1" secs="$2"; shift 2
  local work="build/fuzz/work/$t" art="build/fuzz/artifacts/$t/" dict=()
  mkdir -p "$work" "$art"
  [ -f "tests/fuzz/dict/$t.dict" ] && dict=(-dict="tests/fuzz/dict/$t.dict")
  local log="build/fuzz/$t.log" dirs=("$work" "tests/fuzz/seeds/$t")
  [ -d "tests/fuzz/regressions/$t" ] && dirs+=("tests/fuzz/regressions/$t")
  local rc=0
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}" \
    "$BIN/tessera_fuzz_$t" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2560 -max_len=65536 \
      -print_final_stats=1 -artifact_prefix="$art" "${dict[@]}" "$@" "${dirs[@]}" >"$log" 2>&1 || rc=$?
  local execs; execs=$(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  if [ "$rc" -ne 0 ]; then
    echo "fuzz: $t: FINDING after ${secs} s budget (exit $rc); input in $art, log $log" >&2
    grep -E "ERROR|fuzz finding|SUMMARY|runtime error" "$log" | head -5 >&2 || true
    return 1
  fi
  echo "fuzz: $t: ${secs} s, $execs executions, no finding"
}

case "${1:-smoke}" in
  build) build ;;
  seeds) build; "$BIN/tessera_fuzz_seeds" . tests/fuzz/seeds ;;
  run) [ -n "${TESSERA_FUZZ_NO_BUILD:-}" ] || build >/dev/null; fuzz "$2" "$3" "${@:4}" ;;
  smoke)
    secs="${2:-${TESSERA_FUZZ_SECONDS:-30}}"
    start=$(date +%s)
    build
    ctest --preset fuzz -j "$JOBS"
    failed=0
    if [ "$secs" -gt 0 ]; then  # (libFuzzer reads -max_total_time=0 as "no limit")
      for t in "${TARGETS[@]}"; do fuzz "$t" "$secs" || failed=1; done
    fi
    echo "fuzz smoke time: $(( $(date +%s) - start )) s (${#TARGETS[@]} targets x ${secs} s)"
    exit "$failed" ;;
  *) echo "usage: scripts/fuzz.sh build|smoke [SECONDS]|run TARGET SECONDS|seeds" >&2; exit 2 ;;
esac
