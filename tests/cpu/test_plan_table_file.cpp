// User plan-table files (include/tessera/plan_table_file.hpp): checked like the embedded table, errors naming the
// file, and run_cpu selecting with one (CpuRunOptions::plan_table_path).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/catalog.hpp"
#include "core/plan_table.hpp"
#include "host_tensor.hpp"
#include "mask_gen.hpp"
#include "temp_path.hpp"
#include "tessera/error.hpp"
#include "tessera/plan_table_file.hpp"
#include "tessera/runtime_cpu.hpp"

namespace tessera {
namespace {

using testing::HostTensor;

struct Request {
  HostTensor q{DType::kBFloat16, {1, 256, 2, 64}}, k{DType::kBFloat16, {1, 256, 2, 64}},
      v{DType::kBFloat16, {1, 256, 2, 64}}, o{DType::kFloat64, {1, 256, 2, 64}};
  testing::HostMaskTensors mask;
  AttentionRequest req;
  Request() {
    q.fill_normal(1);
    k.fill_normal(2);
    v.fill_normal(3);
    std::mt19937_64 g(4);
    const MaskShape s{1, 2, 4, 4};
    mask = testing::encode_dense(s, testing::random_mask_bits(s, testing::MaskPattern::kRandom, 0.5, g));
    req.q = q.view();
    req.k = k.view();
    req.v = v.view();
    req.o = o.view();
    req.geometry = {64, 64};
    req.mask = mask.mask;
  }
};

void write(const std::filesystem::path& p, const std::string& text) { std::ofstream(p) << text; }

/// A one-leaf table for the request's key ranking `first` before the key's default plan `base`.
PlanTable table_for(const std::string& key, const std::string& first, const std::string& base) {
  PlanTable t;
  t.catalog_version = std::string(catalog_version());
  t.arch = "sm90a";
  RegimeTree tree;
  tree.key = key;
  tree.base_plan = base;
  tree.nodes = {TreeNode{-1, 0, -1, -1, 0}};
  tree.rankings = {{first, base}};
  tree.leaf_cases = {4};
  t.trees[key] = tree;
  return t;
}

void expect_error(const std::string& path, const std::string& arch, ErrorCode code, const std::string& words) {
  try {
    check_plan_table_file(path, arch);
    ADD_FAILURE() << "no error for " << path;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_EQ(e.argument(), "plan_table_path") << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(PlanTableFile, RunCpuSelectsWithTheUserTable) {
  Request r;
  CpuRunOptions plain;
  plain.use_plan_table = false;
  const DispatchInfo d = run_cpu(r.req, plain);  // the documented default plan of the key
  ASSERT_EQ(d.source, "default");
  EXPECT_EQ(d.table_status, "plan tables disabled: documented default plans");
  const std::string base = d.plan_id;
  ASSERT_NE(base.find(".split1."), std::string::npos) << base;
  std::string other = base;
  other.replace(other.find(".split1."), 8, ".split2.");
  CpuRunOptions forced;
  forced.plan_id = other;
  ASSERT_NO_THROW(run_cpu(r.req, forced)) << other << " must be eligible";

  const std::string key = d.regime.substr(0, d.regime.find('/'));
  const auto path = testing::unique_temp_path("user_table", ".json");
  write(path, plan_table_to_json(table_for(key, other, base)));
  const PlanTableFileInfo info = check_plan_table_file(path.string(), "sm90a");
  EXPECT_EQ(info.arch, "sm90a");
  EXPECT_EQ(info.keys, 1);
  EXPECT_EQ(info.status, "table from " + path.string() + " (" + std::string(catalog_version()) + ", 1 keys)");
  CpuRunOptions user;
  user.plan_table_path = path.string();
  const DispatchInfo u = run_cpu(r.req, user);
  EXPECT_EQ(u.plan_id, other);
  EXPECT_EQ(u.source, "table");
  EXPECT_EQ(u.regime, key + "/leaf0");
  EXPECT_EQ(u.table_status, info.status);
  EXPECT_EQ(run_cpu(r.req, CpuRunOptions{}).table_status.rfind("embedded table for sm90a", 0), 0u);

  // Rewritten on disk: read again, and a table that became unusable is an error naming it, never a fallback.
  PlanTable stale = table_for(key, other, base);
  stale.catalog_version = "cat-other-build";
  write(path, plan_table_to_json(stale) + "\n\n");
  try {
    run_cpu(r.req, user);
    ADD_FAILURE() << "no error for a table of another catalog";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "plan_table_path") << e.what();
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

// One key's plans: the base plan, another plan of the same entry, and an id that parses but whose kernel entry
// (mma.bf16.d64.t64x64.w4.s3) this build's catalog does not have.
constexpr const char* kKey = "sm90a.bf16.d64.q64.kv64";
constexpr const char* kBase = "sm90a.mma.bf16.d64.q64d.kv64d.g1.tasc.split1.s2.w4";
constexpr const char* kOther = "sm90a.mma.bf16.d64.q64d.kv64d.g1.tasc.split2.s2.w4";
constexpr const char* kNoEntry = "sm90a.mma.bf16.d64.q64d.kv64d.g1.tasc.split1.s3.w4";

TEST(PlanTableFile, BadFilesAreErrorsNamingTheFile) {
  const auto dir = testing::unique_temp_path("user_tables");
  std::filesystem::create_directories(dir);
  const PlanTable good = table_for(kKey, kOther, kBase);
  const std::string corrupt = (dir / "corrupt.json").string();
  write(corrupt, "{\"format\": \"tessera-plan-table\", \"format_");
  expect_error(corrupt, "", ErrorCode::kFormatError, "not a usable plan table");
  PlanTable other_catalog = good;
  other_catalog.catalog_version = "cat-other-build";
  const std::string cat = (dir / "catalog.json").string();
  write(cat, plan_table_to_json(other_catalog));
  expect_error(cat, "", ErrorCode::kFormatError, "cat-other-build");
  PlanTable v1 = good;
  v1.format_version = 1;
  const std::string ver = (dir / "v1.json").string();
  write(ver, plan_table_to_json(v1));
  expect_error(ver, "", ErrorCode::kFormatError, "format_version");
  const std::string ok = (dir / "good.json").string();
  write(ok, plan_table_to_json(good));
  EXPECT_EQ(check_plan_table_file(ok).arch, "sm90a");
  expect_error(ok, "sm80", ErrorCode::kFormatError, "table for sm90a, this GPU is sm80");
  expect_error((dir / "missing.json").string(), "", ErrorCode::kIoError, "no such file");
  expect_error(dir.string(), "", ErrorCode::kIoError, "is a directory");
  EXPECT_THROW(check_plan_table_file(""), Error);
  std::filesystem::remove_all(dir);
}

// The table the tests below each break in one place: one key ranking kOther before kBase (it loads).
nlohmann::json loadable_table() { return nlohmann::json::parse(plan_table_to_json(table_for(kKey, kOther, kBase))); }

/// Writes the loadable table to a file and checks that it loads, then writes `broken` (the loadable table with one
/// defect) to the same file and checks that loading it is a format error naming the file and `reason`.
void expect_defect(const nlohmann::json& broken, const std::string& reason) {
  const auto path = testing::unique_temp_path("defective_table", ".json");
  write(path, loadable_table().dump(1));
  EXPECT_EQ(check_plan_table_file(path.string(), "sm90a").keys, 1);
  write(path, broken.dump(1));
  expect_error(path.string(), "sm90a", ErrorCode::kFormatError, "is not a usable plan table: " + reason);
  std::filesystem::remove(path);
}

/// "tree '<kKey>' leaf 0 ranks plan '<id>'", how a ranked id's errors begin.
std::string ranked(const std::string& id) { return "tree '" + std::string(kKey) + "' leaf 0 ranks plan '" + id + "'"; }

// A table of this build's catalog version cannot name ids this build does not know: each is an error, never skipped.
TEST(PlanTableFile, RankedIdThatDoesNotParseIsAnError) {
  nlohmann::json j = loadable_table();
  j["tables"][0]["rankings"][0][0] = "xyz";
  expect_defect(j, ranked("xyz") + ", which does not parse");
}

TEST(PlanTableFile, EmptyRankedIdIsAnError) {
  nlohmann::json j = loadable_table();
  j["tables"][0]["rankings"][0][0] = "";
  expect_defect(j, ranked("") + ": the plan id is empty");
}

TEST(PlanTableFile, IdTwiceInOneRankingIsAnError) {
  nlohmann::json j = loadable_table();
  j["tables"][0]["rankings"][0] = {kOther, kOther, kBase};
  expect_defect(j, ranked(kOther) + " twice");
}

TEST(PlanTableFile, RankedIdOfNoCatalogEntryIsAnError) {
  ASSERT_NO_THROW(parse_plan_id(kNoEntry));  // the id is well formed: only its entry is missing
  nlohmann::json j = loadable_table();
  j["tables"][0]["rankings"][0][0] = kNoEntry;
  expect_defect(j, ranked(kNoEntry) + ", whose kernel entry 'mma.bf16.d64.t64x64.w4.s3' is not in this build's catalog");
}

TEST(PlanTableFile, BadBasePlanIsAnError) {
  // The base plan is checked before the rankings, which end with it: only base_plan is changed.
  const std::string tree = "tree '" + std::string(kKey) + "' base_plan '";
  for (const auto& [id, defect] : std::vector<std::pair<std::string, std::string>>{
           {"xyz", ", which does not parse"},
           {"", ": the plan id is empty"},
           {kNoEntry, ", whose kernel entry 'mma.bf16.d64.t64x64.w4.s3' is not in this build's catalog"}}) {
    nlohmann::json j = loadable_table();
    j["tables"][0]["base_plan"] = id;
    expect_defect(j, tree + id + "'" + defect);
  }
}

TEST(PlanTableFile, TableWithoutTreesIsAnError) {
  nlohmann::json j = loadable_table();
  j["tables"] = nlohmann::json::array();
  expect_defect(j, "the table has no trees (field 'tables' is empty)");
}

}  // namespace
}  // namespace tessera
