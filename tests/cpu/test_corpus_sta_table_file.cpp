// The STA table reader is strict: keys are three canonical decimal integers (no sign, blank, leading zero or
// overflow: sscanf("%d") read "+0_ 0_0" as 0_0_0), windows are JSON integers in the tile grid (nlohmann's
// get<int>() read 4294967297 as 1).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "expect_error.hpp"
#include "tessera/error.hpp"
#include "tessera_corpus/sta.hpp"
#include "temp_path.hpp"

namespace tessera::corpus {
namespace {

namespace fs = std::filesystem;

// Loads `text` as a table of 1 step x 1 layer x 2 heads.
StaTable load_text(const std::string& text) {
  // One file per process and test: CTest runs these tests in parallel processes (and other checkouts may run
  // them at the same time), so a shared name lets one test read another's half-written table.
  const fs::path p = tessera::testing::unique_temp_path("tessera_sta_table_file_test", ".json");
  struct RemoveAtExit {  // also when load_sta_table throws (most tests here expect it to)
    fs::path path;
    ~RemoveAtExit() {
      std::error_code ec;
      fs::remove(path, ec);
    }
  } remove_at_exit{p};
  std::ofstream(p) << text;
  return load_sta_table(p.string(), 1, 1, 2);
}

void expect_rejected(const std::string& text, const std::string& fragment) {
  expect_error([&] { load_text(text); }, ErrorCode::kFormatError, "sta_table", fragment, text);
}

TEST(StaTableFile, ValidTableLoads) {
  const StaTable t = load_text(R"({"0_0_0": [3, 6, 10], "0_0_1": [5, 1, 4]})");
  EXPECT_EQ(t.at(0, 0, 0), (StaWindow{3, 6, 10}));
  EXPECT_EQ(t.at(0, 0, 1), (StaWindow{5, 1, 4}));
}

TEST(StaTableFile, WindowsAreJsonIntegersInTheGrid) {
  expect_rejected(R"({"0_0_0": [4294967297, 6, 10], "0_0_1": [5, 1, 4]})",
                  "window t of '0_0_0' (5x6x10 grid) is 4294967297, not an integer in [1, 5]");
  expect_rejected(R"({"0_0_0": [3, 4294967302, 10], "0_0_1": [5, 1, 4]})", "window h of '0_0_0'");
  expect_rejected(R"({"0_0_0": [3, 6, 18446744073709551615], "0_0_1": [5, 1, 4]})", "window w of '0_0_0'");
  expect_rejected(R"({"0_0_0": [3.0, 6, 10], "0_0_1": [5, 1, 4]})", "window t of '0_0_0' (5x6x10 grid) is 3.0");
  expect_rejected(R"({"0_0_0": [true, 6, 10], "0_0_1": [5, 1, 4]})", "is true");
  expect_rejected(R"({"0_0_0": [0, 6, 10], "0_0_1": [5, 1, 4]})", "is 0, not an integer in [1, 5]");
  expect_rejected(R"({"0_0_0": [3, 6, 11], "0_0_1": [5, 1, 4]})", "is 11, not an integer in [1, 10]");
  expect_rejected(R"({"0_0_0": [3, 6], "0_0_1": [5, 1, 4]})", "bad window for key '0_0_0'");
}

TEST(StaTableFile, KeysAreCanonicalDecimalTriples) {
  for (const char* key : {"0_0_4294967296", "+0_0_0", "+0_ 0_0", "0_ 0_0", " 0_0_0", "0_0_0 ", "-0_0_0", "00_0_0",
                          "0_0_01", "0_0", "0_0_0_0", "0__0", "0_0_0x", "0_0_2", "0_1_0", "1_0_0", ""}) {
    const std::string text = std::string(R"({")") + key + R"(": [3, 6, 10], "0_0_1": [5, 1, 4]})";
    expect_rejected(text, std::string("bad key '") + key + "'");
  }
  EXPECT_EQ(parse_sta_key("12_34_5", {50, 60, 24}), (std::array<int, 3>{12, 34, 5}));
  EXPECT_FALSE(parse_sta_key("12_34_24", {50, 60, 24}));
  EXPECT_FALSE(parse_sta_key("0_0_4294967296", {50, 60, 24}));
}

}  // namespace
}  // namespace tessera::corpus
