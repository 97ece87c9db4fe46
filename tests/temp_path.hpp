#pragma once
// A temporary path private to this test process and test: CTest runs tests in parallel processes, and other
// checkouts on the same machine run the same tests, so a fixed /tmp name lets one test read or delete another's file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace tessera::testing {

/// temp_directory_path() / "<stem>_<pid>_<suite>_<test><ext>". Nothing is created; the caller removes what it makes.
inline std::filesystem::path unique_temp_path(const std::string& stem, const std::string& ext = "") {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string test = info ? std::string(info->test_suite_name()) + "_" + info->name() : "none";
  return std::filesystem::temp_directory_path() / (stem + "_" + std::to_string(::getpid()) + "_" + test + ext);
}

}  // namespace tessera::testing
