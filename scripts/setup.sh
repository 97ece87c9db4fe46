#!/usr/bin/env bash
# Installs every Debian and PyPI dependency that Tessera's build and tests need. Idempotent: it installs
# only what is missing, so running it again is cheap. Needs root (or sudo) for apt-get.
set -euo pipefail
DEBIAN_PACKAGES=(
  build-essential cmake ninja-build git pkg-config python3 python3-pip
  libgtest-dev googletest libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libpng-dev zlib1g-dev
  clang libclang-rt-14-dev  # the libFuzzer targets (scripts/fuzz.sh: clang 14, libFuzzer + ASan/UBSan runtimes)
)
missing=()
for p in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The CMake presets (CMakePresets.json, preset "base") name this compiler (CMAKE_CUDA_COMPILER); an nvcc elsewhere
# on PATH is not used by them.
PRESET_NVCC=/usr/local/cuda/bin/nvcc
if [ ! -x "$PRESET_NVCC" ]; then
  if command -v nvcc >/dev/null 2>&1; then
    toolkit=$(dirname "$(dirname "$(command -v nvcc)")")
    echo "setup: error: the CMake presets build with CMAKE_CUDA_COMPILER=$PRESET_NVCC (CMakePresets.json, preset" \
         "\"base\"), which does not exist; nvcc is at $(command -v nvcc): link that toolkit" \
         "(ln -s $toolkit /usr/local/cuda) or change CMAKE_CUDA_COMPILER in CMakePresets.json" >&2
  else
    echo "setup: error: the CUDA toolkit (nvcc >= 12.8) is required at /usr/local/cuda (the CMake presets use" \
         "$PRESET_NVCC) and was not found there or on PATH" >&2
  fi
  exit 1
fi
# Python packages: the corpus tests (reading mask files with safetensors + numpy alone), the Python package
# (nanobind builds tessera._C, scikit-build-core drives `pip install .`, pytest runs python/tests) and the peer
# scoreboard's report (matplotlib draws bench/RESULTS.md's charts; tests/python/test_peers.py) and the property-based
# fuzz test of the CPU path (hypothesis; python/tests/test_fuzz_cpu.py) and torch, for the torch.distributed tests of
# tessera.distributed on gloo (python/tests/test_distributed_cpu.py) and the CPU torch tests. Only PyPI is reachable
# from CI's machines (not the CPU-only wheel index), so this is PyPI's Linux torch wheel with the CUDA libraries it
# depends on (about 3 GB; measured: see README's CI timing note); the tests use its CPU and gloo paths only.
# diffusers (the version the GPU machine gets as a wheel, scripts/stage_peer_wheels.sh): the attention processors'
# tests on tiny Wan and HunyuanVideo transformers (python/tests/test_attn_processor.py, test_model_hunyuan.py).
# Entries are pip-name:import-name.
PY_PACKAGES=(numpy:numpy safetensors:safetensors nanobind:nanobind scikit-build-core:scikit_build_core pytest:pytest
             matplotlib:matplotlib hypothesis:hypothesis torch:torch diffusers==0.36.0:diffusers)
pymissing=()
for entry in "${PY_PACKAGES[@]}"; do
  python3 -c "import ${entry#*:}" 2>/dev/null || pymissing+=("${entry%%:*}")
done
if ((${#pymissing[@]})); then
  echo "setup: installing Python packages: ${pymissing[*]}"
  python3 -m pip install -q "${pymissing[@]}"
fi
echo "setup: all dependencies present"
