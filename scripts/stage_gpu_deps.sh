#!/usr/bin/env bash
# Stages the build dependencies for the GPU machine, which reaches no package registry: downloads the Debian
# packages of the header/static libraries the build needs and unpacks them under .deps/root (git-ignored).
# scripts/gpu_check.sh then points CMake at them. Run here (where apt works); carry `.deps` to the device.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(libgtest-dev googletest libbenchmark-dev libbenchmark1debian nlohmann-json3-dev libcli11-dev libfmt-dev libfmt9
      libpng-dev libpng16-16 zlib1g-dev)
mkdir -p .deps/debs .deps/root
(cd .deps/debs && apt-get download "${PKGS[@]}" >/dev/null)
for f in .deps/debs/*.deb; do dpkg -x "$f" .deps/root; done
rm -rf .deps/debs
# Documentation and googletest's sources are not used by the build (the static libraries and CMake files are): dropped,
# so that .deps (~6 MB) and the peers' wheels (.whl, ~43 MB) fit one device call's 64 MiB together with the tree.
rm -rf .deps/root/usr/share/doc .deps/root/usr/share/man .deps/root/usr/share/doc-base .deps/root/usr/src
# Pure-Python packages for the Python module and its tests (nanobind ships its C++ sources and CMake files; pytest and
# its dependencies are pure Python): unpacked under .deps/python, which scripts/gpu_check.sh appends to PYTHONPATH
# (packages the GPU image already has take precedence).
mkdir -p .deps/wheels .deps/python
python3 -m pip download -q --only-binary=:all: --python-version 3.10 -d .deps/wheels nanobind pytest
for w in .deps/wheels/*.whl; do python3 -m zipfile -e "$w" .deps/python; done
rm -rf .deps/wheels .deps/python/pygments  # pytest's highlighter: the GPU image has its own (5 MB)
echo "staged: $(du -sh .deps | cut -f1) under .deps/root"
