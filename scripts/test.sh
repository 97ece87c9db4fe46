#!/usr/bin/env bash
# The test command (README, .ci/run): installs dependencies, builds the CI preset, runs every test.
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
