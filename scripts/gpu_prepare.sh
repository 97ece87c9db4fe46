#!/usr/bin/env bash
# Run here before a call to the GPU machine: stages dependencies (once) and records the git revision (with
# "-dirty" for uncommitted changes) in .revision, since the copy sent there has no .git. Carry .deps and .revision.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d .deps/root ] || scripts/stage_gpu_deps.sh
rev=$(git rev-parse --short=12 HEAD)
git diff --quiet HEAD || rev="$rev-dirty"
echo "$rev" > .revision
echo "revision $rev; carry [\".deps\", \".revision\"]"
