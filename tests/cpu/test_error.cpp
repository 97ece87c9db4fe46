#include <gtest/gtest.h>

#include "tessera/error.hpp"
#include "tessera/version.hpp"

TEST(Error, WhatNamesCodeArgumentAndMessage) {
  tessera::Error e(tessera::ErrorCode::kInvalidArgument, "geometry.block_q", "must be a multiple of 16, got 24");
  EXPECT_STREQ(e.what(), "tessera: invalid argument: geometry.block_q: must be a multiple of 16, got 24");
  EXPECT_EQ(e.code(), tessera::ErrorCode::kInvalidArgument);
  EXPECT_EQ(e.argument(), "geometry.block_q");
  EXPECT_EQ(e.message(), "must be a multiple of 16, got 24");
}

TEST(Error, WhatWithoutArgument) {
  tessera::Error e(tessera::ErrorCode::kInternal, "", "invariant failed");
  EXPECT_STREQ(e.what(), "tessera: internal: invariant failed");
}

TEST(Version, IsSemantic) {
  EXPECT_STREQ(tessera::version(), "0.1.0");
  EXPECT_STRNE(tessera::git_revision(), "");
}
