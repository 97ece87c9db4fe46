// What `tessera profile --masks` and `--case-ids` profile (corpus/include/tessera_corpus/profile_inputs.hpp): the
// user's mask files, the corpus cases a file of case ids names, and the identity fields of their records, checked
// without a GPU.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/profile_record_check.hpp"
#include "expect_error.hpp"
#include "temp_path.hpp"
#include "tessera/error.hpp"
#include "tessera_corpus/family.hpp"
#include "tessera_corpus/mask_file.hpp"
#include "tessera_corpus/profile_inputs.hpp"

namespace tessera::corpus {
namespace {

namespace fs = std::filesystem;
const std::vector<std::string> kBothSplits{"profiling", "evaluation"};

Case small_case(int index) {
  CorpusOptions opt;
  opt.small = true;
  return make_case("Q64K64-HD", index, opt);
}

void expect_error(const std::vector<std::string>& paths, const std::string& argument, const std::string& words,
                  const std::vector<std::string>& splits = kBothSplits) {
  try {
    list_mask_files(paths, splits);
    ADD_FAILURE() << "no error for " << words;
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(ProfileInputs, RecordFieldsOfACase) {
  const Case c = small_case(3);
  const ProfileRecord r = case_record_fields(c.meta, "sm90a");
  EXPECT_EQ(r.case_id, "Q64K64-HD/" + c.meta.source_id + "/3");
  EXPECT_EQ(r.source, c.meta.source_id);
  EXPECT_EQ(r.request, c.meta.source_id + "#" + std::to_string(c.meta.chunk));
  EXPECT_EQ(r.split, c.meta.split == "profiling" ? "profile" : "eval");
  EXPECT_EQ(r.key, "sm90a.bf16.d128.q64.kv64");
  const ProfileCaseId id = parse_profile_case_id(r.case_id);  // what compile-table accepts
  EXPECT_EQ(id.source, r.source);
  EXPECT_FALSE(id.whole_request);
  const ProfileRecord w = case_record_fields(c.meta, "sm90a", /*whole_request=*/true);
  EXPECT_EQ(w.case_id, r.case_id + "/whole");
  EXPECT_EQ(w.request, r.request);  // the whole request and its case share a cross-validation fold
  EXPECT_TRUE(parse_profile_case_id(w.case_id).whole_request);
  CaseMeta bad = c.meta;
  bad.family = "my/family";
  EXPECT_THROW(case_record_fields(bad, "sm90a"), Error);
  bad = c.meta;
  bad.split = "train";
  EXPECT_THROW(case_record_fields(bad, "sm90a"), Error);
}

TEST(ProfileInputs, MaskFilesAndDirectories) {
  const fs::path dir = testing::unique_temp_path("user_masks");
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  const Case a = small_case(0), b = small_case(5);
  write_mask_file((dir / "b.safetensors").string(), b);
  write_mask_file((dir / "a.safetensors").string(), a);
  write_mask_file((dir / "sub" / "ignored.safetensors").string(), a);  // subdirectories are not read
  std::ofstream(dir / "README.txt") << "not a mask";
  const std::vector<MaskFileInput> all = list_mask_files({dir.string()}, kBothSplits);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].path, (dir / "a.safetensors").string());  // sorted by name
  EXPECT_EQ(all[0].case_id, case_record_fields(a.meta, "sm90a").case_id);
  EXPECT_EQ(all[1].case_id, case_record_fields(b.meta, "sm90a").case_id);
  EXPECT_EQ(all[1].meta.split, b.meta.split);
  // A split filter keeps the files of that split only.
  const std::vector<MaskFileInput> one = list_mask_files({dir.string()}, {a.meta.split});
  for (const MaskFileInput& in : one) EXPECT_EQ(in.meta.split, a.meta.split);
  EXPECT_EQ(one.size(), a.meta.split == b.meta.split ? 2u : 1u);

  expect_error({}, "--masks", "no mask file");
  expect_error({(dir / "sub").string() + "/../a.safetensors", (dir / "a.safetensors").string()}, "--masks",
               "more than once");
  expect_error({dir.string(), (dir / "sub").string()}, "--masks", "same case");
  const fs::path empty = dir / "empty";
  fs::create_directories(empty);
  expect_error({empty.string()}, "--masks", "holds no .safetensors file");
  try {  // no subdirectory holds masks: no hint
    list_mask_files({empty.string()}, kBothSplits);
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("subdirectories"), std::string::npos) << e.what();
  }
  // The files only in subdirectories (two levels down, after an empty one): not searched, the first one named.
  const fs::path nested = dir / "nested";
  fs::create_directories(nested / "a_empty");
  fs::create_directories(nested / "b" / "y");
  fs::create_directories(nested / "b" / "x");
  write_mask_file((nested / "b" / "y" / "m.safetensors").string(), a);
  write_mask_file((nested / "b" / "x" / "m.safetensors").string(), b);
  expect_error({nested.string()}, "--masks",
               "directory '" + nested.string() + "' holds no .safetensors file; its subdirectories are not searched "
               "(not recursive), and '" + (nested / "b" / "x").string() + "' holds some");
  // One file, not in the splits given: singular.
  const std::string other_split = a.meta.split == "profiling" ? "evaluation" : "profiling";
  expect_error({(dir / "a.safetensors").string()}, "--masks", "the 1 mask file is not in the splits given",
               {other_split});
  if (a.meta.split == b.meta.split)
    expect_error({(dir / "a.safetensors").string(), (dir / "b.safetensors").string()}, "--masks",
                 "none of the 2 mask files is in the splits given", {other_split});
  const std::string missing = (dir / "missing.safetensors").string();
  expect_error({missing}, "--masks", "'" + missing + "': cannot read");  // the option and the path
  const std::string junk = (dir / "README.txt").string();
  expect_error({junk}, junk, "header");
  fs::remove_all(dir);
}

/// Writes `text` to a fresh file of this test and returns its path.
std::string case_id_file(const std::string& text) {
  const std::string path = testing::unique_temp_path("case_ids", ".txt").string();
  std::ofstream(path) << text;
  return path;
}

TEST(ProfileInputs, CaseIdsFile) {
  CorpusOptions opt;
  opt.small = true;
  const std::string a = "Q64K64-HD/" + case_origin("Q64K64-HD", 3, opt).source_id + "/3";
  const std::string b = "Q64K64-HD/" + case_origin("Q64K64-HD", 12, opt).source_id + "/12";
  const std::string path = case_id_file("# cases for the next profile\n\n  " + b + "/whole \t\n" + a + "\r\n\n");
  const std::vector<CaseIdInput> ids = read_case_ids(path, opt);
  ASSERT_EQ(ids.size(), 2u);  // file order
  EXPECT_EQ(ids[0].family, "Q64K64-HD");
  EXPECT_EQ(ids[0].index, 12);
  EXPECT_TRUE(ids[0].whole_request);
  EXPECT_EQ(ids[0].case_id, b + "/whole");
  EXPECT_EQ(ids[1].index, 3);
  EXPECT_FALSE(ids[1].whole_request);
  EXPECT_EQ(ids[1].case_id, a);
  EXPECT_EQ(ids[1].case_id, case_record_fields(make_case("Q64K64-HD", 3, opt).meta, "sm90a").case_id);
  std::filesystem::remove(path);
  // A UTF-8 byte-order mark at the start of the file (as some editors write) is skipped.
  const std::string bom = case_id_file("\xEF\xBB\xBF" + a + "\n" + b + "\n");
  const std::vector<CaseIdInput> after_bom = read_case_ids(bom, opt);
  ASSERT_EQ(after_bom.size(), 2u);
  EXPECT_EQ(after_bom[0].case_id, a);
  std::filesystem::remove(bom);
}

TEST(ProfileInputs, CaseIdsErrors) {
  CorpusOptions opt;
  opt.small = true;
  const int count = case_count("Q64K64-HD", opt);
  const std::string source = case_origin("Q64K64-HD", 3, opt).source_id;
  const std::string a = "Q64K64-HD/" + source + "/3";
  const auto invalid = [&](const std::string& text, const std::string& fragment) {
    const std::string path = case_id_file(text);
    tessera::expect_error([&] { read_case_ids(path, opt); }, ErrorCode::kInvalidArgument, "--case-ids", fragment, text);
    std::filesystem::remove(path);
  };
  const std::string path = testing::unique_temp_path("case_ids", ".txt").string();  // case_id_file's
  invalid(a + "\nQ64K64-HD/" + source + "/03\n", path + ":2: case id 'Q64K64-HD/" + source + "/03' has index '03'");
  invalid(a + "\nQ64K64-HD-3\n", ":2: case id 'Q64K64-HD-3' is not");
  invalid("# x\nBogus/" + source + "/3\n", ":2: case id 'Bogus/" + source + "/3': unknown family 'Bogus'");
  invalid("Bogus/" + source + "/3\n", "Q64K64-HD");  // the known families listed
  invalid(a + "\n\nQ64K64-HD/" + source + "/" + std::to_string(count) + "\n",
          fmt::format(":3: case id 'Q64K64-HD/{}/{}': index {} is out of range: family Q64K64-HD has {} cases", source,
                      count, count, count));
  std::string other;  // a source of the family that is not case 3's
  for (int i = 0; i < count && other.empty(); ++i)
    if (case_origin("Q64K64-HD", i, opt).source_id != source) other = case_origin("Q64K64-HD", i, opt).source_id;
  ASSERT_FALSE(other.empty());
  invalid("Q64K64-HD/" + other + "/3\n", ":1: case id 'Q64K64-HD/" + other + "/3': case 3 of family Q64K64-HD is of "
                                          "source '" + source + "', not '" + other + "'");
  invalid(a + "\n" + a + "/whole\n " + a + "\n", ":3: case id '" + a + "' is given twice (lines 1 and 3)");
  // Several ids on a line, a comment after an id ('#' starts a comment only at the start of a line).
  invalid(a + "," + a + "\n", ":1: case id '" + a + "," + a + "' holds ',': one case id per line");
  invalid(a + "\n" + a + " \t" + a + "\n", ":2: case id '" + a + " \\x09" + a + "' holds whitespace: one case id per "
                                         "line");
  invalid(a + " # the next one\n", ":1: case id '" + a + " # the next one' holds '#': '#' starts a comment only at the "
                                    "start of a line");
  invalid(a + "#x\n", ":1: case id '" + a + "#x' holds '#'");
  // Bytes other than printable ASCII are escaped in the message; a byte-order mark after the start is one of them.
  invalid(a + "\n" + std::string("Q64K\x00\x1b[2J", 9) + "\n",
          ":2: case id 'Q64K\\x00\\x1b[2J' holds the byte \\x00: case ids are printable ASCII");
  invalid(a + "\n\xEF\xBB\xBF" + a + "\n", ":2: case id '\\xef\\xbb\\xbf" + a + "' holds the byte \\xef");
  // A huge line is cut after ~80 characters, with its length, wherever a message quotes it or a part of it.
  const std::string huge_family(1 << 20, 'F');
  for (const std::string& line : {huge_family, huge_family + "/" + source + "/3",
                                  "Q64K64-HD/" + source + "/" + huge_family, "Q64K64-HD/" + huge_family + "/3"}) {
    const std::string p = case_id_file(line + "\n");
    try {
      read_case_ids(p, opt);
      ADD_FAILURE() << "a huge line accepted";
    } catch (const Error& e) {
      EXPECT_LT(e.message().size(), 600u) << e.message().substr(0, 1000);
      EXPECT_NE(e.message().find(fmt::format("...' ({} bytes)", line.size())), std::string::npos)
          << e.message().substr(0, 1000);
    }
    std::filesystem::remove(p);
  }
  invalid(a + "\n" + huge_family + "\n", ":2: case id '" + std::string(80, 'F') + "...' (1048576 bytes) is not");
  invalid("Q64K64-HD/" + source + "\\x/3\n", "case id 'Q64K64-HD/" + source + "\\\\x/3': case 3 of family");
  invalid("", ": no case id");
  invalid("# only a comment\n\n   \n", ": no case id");
  const std::string missing = testing::unique_temp_path("no_case_ids", ".txt").string();
  tessera::expect_error([&] { read_case_ids(missing, opt); }, ErrorCode::kIoError, "--case-ids",
                        missing + ": cannot be read", "a missing file");
  const std::string dir = testing::unique_temp_path("case_ids_dir").string();
  std::filesystem::create_directories(dir);
  tessera::expect_error([&] { read_case_ids(dir, opt); }, ErrorCode::kIoError, "--case-ids",
                        dir + ": cannot be read", "a directory");
  std::filesystem::remove_all(dir);
  tessera::expect_error([&] { read_case_ids("", opt); }, ErrorCode::kInvalidArgument, "--case-ids", "empty path",
                        "an empty path");
}

}  // namespace
}  // namespace tessera::corpus
