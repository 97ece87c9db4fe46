// Resumable profile records files: whole-case appends, and repair of a file cut off in the middle of a write.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/profile_file.hpp"
#include "tessera/error.hpp"

namespace tessera {
namespace {

ProfileRecord record(const std::string& case_id, const std::string& plan) {
  ProfileRecord r;
  r.case_id = case_id;
  r.source = "src";
  r.request = "src#0";
  r.split = "profile";
  r.key = "sm90a.bf16.d128.q64.kv64";
  r.plan = plan;
  r.latency_us = 10;
  r.valid = true;
  return r;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ProfileFile : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("tessera_profile_file_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".jsonl"))
                .string();
    std::filesystem::remove(path_);
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::string path_;
};

TEST_F(ProfileFile, MissingFileHoldsNoCase) {
  int repaired = -1;
  EXPECT_TRUE(resume_profile_file(path_, &repaired).empty());
  EXPECT_EQ(repaired, 0);
}

TEST_F(ProfileFile, WholeCasesAreResumed) {
  append_case_records(path_, {record("A", "p1"), record("A", "p2")});
  append_case_records(path_, {record("B", "p1")});
  int repaired = -1;
  EXPECT_EQ(resume_profile_file(path_, &repaired), (std::set<std::string>{"A", "B"}));
  EXPECT_EQ(repaired, 0);
  const std::string text = slurp(path_);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);
  EXPECT_EQ(profile_record_from_json(text.substr(0, text.find('\n'))).request, "src#0");
}

// A run stopped mid-write leaves a partial line: it and the rest of its case are removed, earlier cases stay.
TEST_F(ProfileFile, CutOffCaseIsRemoved) {
  append_case_records(path_, {record("A", "p1"), record("A", "p2")});
  append_case_records(path_, {record("B", "p1")});
  const std::string partial = profile_record_to_json(record("B", "p2"));
  {
    std::ofstream out(path_, std::ios::app);
    out << partial.substr(0, partial.size() / 2);
  }
  int repaired = 0;
  EXPECT_EQ(resume_profile_file(path_, &repaired), (std::set<std::string>{"A"}));
  EXPECT_EQ(repaired, 2);  // B's complete line and the partial one
  const std::string text = slurp(path_);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
  EXPECT_EQ(text.back(), '\n');
  // Appending after the repair gives whole lines again.
  append_case_records(path_, {record("B", "p1"), record("B", "p2")});
  EXPECT_EQ(resume_profile_file(path_, &repaired), (std::set<std::string>{"A", "B"}));
  EXPECT_EQ(repaired, 0);
}

// A file whose last line has no newline and is no cut of a record (an ids file given as --out, one line with no final
// newline) is not a records file: an error, and the file is not rewritten.
TEST_F(ProfileFile, ForeignFileIsNotRepaired) {
  for (const std::string& text : {std::string("Q128K64/src/3"), std::string("Q128K64/src/3\nQ128K64/src/4")}) {
    {
      std::ofstream out(path_, std::ios::binary | std::ios::trunc);
      out << text;
    }
    try {
      resume_profile_file(path_);
      ADD_FAILURE() << "no error for " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kFormatError);
      EXPECT_EQ(e.argument(), "--out");
      EXPECT_NE(e.message().find("not a profile record"), std::string::npos) << e.message();
    }
    EXPECT_EQ(slurp(path_), text);
  }
}

TEST_F(ProfileFile, BadCompleteLineNamesTheLine) {
  append_case_records(path_, {record("A", "p1")});
  {
    std::ofstream out(path_, std::ios::app);
    out << "{\"case\": 1}\n";
  }
  try {
    resume_profile_file(path_);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "--out");
    EXPECT_NE(e.message().find("line 2"), std::string::npos) << e.message();
  }
}

// `tessera compile-table` and `tessera profile-refeature` read records through read_profile_records: a case id whose
// index is not canonical, or whose source is not the record's, is an error naming --in, the file and the line.
TEST_F(ProfileFile, ReadRejectsBadCaseIdsNamingTheLine) {
  ProfileRecord good = record("STA-real/src/21", "sm90a.mma.bf16.d128.q64d.kv64d.g1.tasc.split1.s2.w4");
  const std::vector<std::pair<std::string, std::string>> bad{
      {"STA-real/src/021", "case id 'STA-real/src/021' has index '021'"},
      {"STA-real/other/22", "field 'source' 'src' differs from the source 'other' of case 'STA-real/other/22'"},
      {"STA-real-21", "case id 'STA-real-21' is not"}};
  for (const auto& [id, needle] : bad) {
    ProfileRecord r = good;
    r.case_id = id;
    {
      std::ofstream out(path_, std::ios::trunc);
      out << profile_record_to_json(good) << "\n" << profile_record_to_json(r) << "\n";
    }
    try {
      read_profile_records(path_, "sm90a");
      ADD_FAILURE() << "accepted case id " << id;
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), "--in");
      EXPECT_NE(e.message().find(path_ + " line 2: field '"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find(needle), std::string::npos) << e.message();
      EXPECT_EQ(std::string(e.what()).find("tessera:", 1), std::string::npos) << e.what();
    }
  }
  {
    std::ofstream out(path_, std::ios::trunc);
    out << profile_record_to_json(good) << "\n";
  }
  EXPECT_EQ(read_profile_records(path_, "sm90a").size(), 1u);
  {  // blank lines (spaces, tabs, a CR) are skipped, as the bench scripts skip them
    std::ofstream out(path_, std::ios::trunc);
    out << "  \t\r\n" << profile_record_to_json(good) << "\n\n \n";
  }
  EXPECT_EQ(read_profile_records(path_, "sm90a").size(), 1u);
}

}  // namespace
}  // namespace tessera
