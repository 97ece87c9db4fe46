#pragma once
// Test helper: a call that must throw tessera::Error with a given code and argument, its message holding a fragment.
#include <gtest/gtest.h>

#include <string>

#include "tessera/error.hpp"

namespace tessera {

/// Runs `f` (no arguments); fails the test unless it throws Error(code, argument, message) with `fragment` in
/// message. `what` names the input in the failure report.
template <class F>
void expect_error(F&& f, ErrorCode code, const std::string& argument, const std::string& fragment,
                  const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "accepted: " << what;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_EQ(e.argument(), argument) << e.what();
    EXPECT_NE(e.message().find(fragment), std::string::npos) << what << " -> " << e.message();
  }
}

}  // namespace tessera
