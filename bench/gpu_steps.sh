# Steps shared by the device-call scripts (bench/run_kernel_ab_gpu.sh, bench/run_table_inputs_gpu.sh,
# bench/run_requests_gpu.sh); sourced (bash). The caller defines stamp() (its timestamped log line) and B (the
# directory of the build's tessera binary, for profile_passes).

# sanitize TEST_BINARY GTEST_FILTER LOG_DIR [TIMEOUT_S (100)]: compute-sanitizer memcheck, racecheck and synccheck side by
# side on those tests -> LOG_DIR/san_<tool>.log; prints each tool's summary and the most frequent reported races. Waits
# only for its own runs (a caller's other background jobs keep running).
sanitize() {
  local bin=$1 filter=$2 log=$3 tool pids=()
  for tool in memcheck racecheck synccheck; do
    ( timeout "${4:-100}" compute-sanitizer --tool $tool --error-exitcode 9 "$bin" --gtest_filter="$filter" \
        > "$log/san_$tool.log" 2>&1; echo "rc=$?" >> "$log/san_$tool.log" ) &
    pids+=($!)
  done
  wait "${pids[@]}"
  for tool in memcheck racecheck synccheck; do
    stamp "$tool $(tail -1 "$log/san_$tool.log"): $(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log/san_$tool.log" | tail -1)"
    grep -E "Race reported" "$log/san_$tool.log" | sort | uniq -c | head -5 | cut -c1-200
  done
}

# profile_passes FILE LOG END_EPOCH_S "<split> <cases per family>;..." [more `tessera profile` arguments]: resumable
# `tessera profile` passes into FILE (each pass adds cases; FAMILIES, space-separated, limits them) until END_EPOCH_S,
# a pass starting only with more than 15 s left; output appended to LOG.
profile_passes() {
  local pf=$1 log=$2 end=$3 pass split n left list; IFS=";" read -ra list <<< "$4"; shift 4
  for pass in "${list[@]}"; do
    read -r split n <<< "$pass"
    left=$(( end - $(date +%s) )); [ "$left" -le 15 ] && break
    timeout "$left" "$B/tessera" profile --out "$pf" --reps 3 --splits "$split" --cases-per-split "$n" \
      ${FAMILIES:+--families $FAMILIES} "$@" >> "$log" 2>&1
    stamp "profile $(basename "$pf") --splits $split --cases-per-split $n rc=$? ($(cat "$pf" 2>/dev/null | wc -l) records)"
  done
}
