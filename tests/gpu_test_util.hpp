#pragma once
// Helpers for GPU tests: skip with a message where no GPU exists.
#include <gtest/gtest.h>

#include "tessera/cuda_types.hpp"

/// Put first in every GPU test body: skips (with a message) when no CUDA device is visible.
#define TESSERA_REQUIRE_GPU()                                                         \
  do {                                                                                \
    if (::tessera::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible: GPU test skipped"; \
  } while (0)
