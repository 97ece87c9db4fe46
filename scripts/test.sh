#!/usr/bin/env bash
# The test command (README, .ci/run): installs dependencies, builds the CI preset, runs every test, then the fuzz
# smoke runs (scripts/fuzz.sh smoke: about 4 minutes).
# GPU tests (label `gpu`) skip with a message where no GPU is visible; on the GPU machine they run.
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET="${TESSERA_PRESET:-ci}"
JOBS="${TESSERA_JOBS:-$(nproc)}"
scripts/setup.sh
start=$(date +%s)
cmake --preset "$PRESET" >/dev/null
cmake --build --preset "$PRESET" -j "$JOBS"
echo "build time: $(( $(date +%s) - start )) s (preset $PRESET, $JOBS jobs)"
ctest --preset "$PRESET" -j "$JOBS" "$@"
# The libFuzzer targets (tests/fuzz): their own small clang build (build/fuzz), the committed inputs replayed, then a
# bounded run of each target (TESSERA_FUZZ_SECONDS each, default 30; 0 skips the fuzzing, not the replay).
scripts/fuzz.sh smoke "${TESSERA_FUZZ_SECONDS:-30}"
