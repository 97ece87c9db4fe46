#include <gtest/gtest.h>

#include "gpu_test_util.hpp"
#include "tessera/cuda_types.hpp"
#include "tessera/error.hpp"

TEST(DeviceBuffer, AllocatesAndMoves) {
  TESSERA_REQUIRE_GPU();
  tessera::DeviceBuffer a(1024);
  ASSERT_NE(a.data(), nullptr);
  EXPECT_EQ(a.bytes(), 1024u);
  void* p = a.data();
  tessera::DeviceBuffer b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);
  b.reserve(512);  // no shrink
  EXPECT_EQ(b.data(), p);
  b.reserve(4096);
  EXPECT_GE(b.bytes(), 4096u);
}
