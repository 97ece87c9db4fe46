// What `tessera profile --masks` profiles (corpus/include/tessera_corpus/profile_inputs.hpp): the user's mask files
// and the identity fields of their records, checked without a GPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/profile_record_check.hpp"
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
  const std::string missing = (dir / "missing.safetensors").string();
  expect_error({missing}, "--masks", "'" + missing + "': cannot read");  // the option and the path
  const std::string junk = (dir / "README.txt").string();
  expect_error({junk}, junk, "header");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera::corpus
