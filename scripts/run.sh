#!/usr/bin/env bash
# The main job (README): installs dependencies, builds, and runs `tessera run` on its embedded default input.
# Extra arguments go to `tessera run`.
set -euo pipefail
cd "$(dirname "$0")/.."
# The same build as scripts/test.sh (preset ci), so the two README commands share one compile.
PRESET="${TESSERA_PRESET:-ci}"
scripts/setup.sh >/dev/null
cmake --preset "$PRESET" >/dev/null
echo "run.sh: building tessera (preset $PRESET; the first build takes minutes)..." >&2
cmake --build --preset "$PRESET" -j "$(nproc)" --target tessera_cli > "build/$PRESET-run-build.log" 2>&1 || { tail -40 "build/$PRESET-run-build.log"; exit 1; }
exec "build/$PRESET/bin/tessera" run "$@"
