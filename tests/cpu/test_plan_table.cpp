// Plan-table artifact and compiler: synthetic profiles with a known best plan per regime.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "core/catalog.hpp"
#include "core/embedded_tables.hpp"
#include "core/plan_table.hpp"
#include "core/table_compiler.hpp"
#include "expect_error.hpp"
#include "tessera/error.hpp"

namespace tessera {
namespace {

constexpr const char* kKey = "sm90a.bf16.d128.q64.kv64";
// Plans of kKey on entries of this build's catalog: a table that is loaded (plan_table_from_json) ranks only plan ids
// this build knows, so the artifact tests use these where the compiler tests use names.
constexpr const char* kBasePlan = "sm90a.mma.bf16.d128.q64d.kv64d.g1.tasc.split1.s2.w4";
constexpr const char* kPlanA = "sm90a.mma.bf16.d128.q64d.kv64d.g1.tasc.split2.s2.w4";
constexpr const char* kPlanB = "sm90a.mma.bf16.d128.q64d.kv64d.g1.tasc.split4.s2.w4";
constexpr const char* kPlanC = "sm90a.mma.bf16.d128.q64d.kv64d.g1.tdesc.split1.s2.w4";
constexpr const char* kSm80Base = "sm80.mma.bf16.d128.q64d.kv64d.g1.tasc.split1.s2.w4";  // of sm80.bf16.d128.q64.kv64

// Plan "fast_sparse" wins below density 0.1, "fast_dense" above; "base" is always 1.5x slower than the best;
// "flaky" is fastest but invalid on a third of the profiled cases (so it can never be ranked) and on every
// evaluation case.
std::vector<ProfileRecord> synthetic_profile(std::uint64_t seed, int cases, const std::string& split) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<ProfileRecord> out;
  for (int c = 0; c < cases; ++c) {
    ProfileRecord r;
    r.case_id = split + "-" + std::to_string(c);
    r.source = split + "-src" + std::to_string(c % 7);
    r.split = split;
    r.key = kKey;
    const double density = 0.01 + 0.3 * u(g);
    r.features = {16, 32768, density, u(g), 1 + 4 * u(g), 10};
    const double t = 100 + 50 * u(g);
    const bool sparse = density < 0.1;
    auto add = [&](const std::string& plan, double lat, bool valid) {
      ProfileRecord x = r;
      x.plan = plan;
      x.latency_us = lat;
      x.valid = valid;
      out.push_back(x);
    };
    add("fast_sparse", sparse ? t : 2 * t, true);
    add("fast_dense", sparse ? 2 * t : t, true);
    add("base", 1.5 * t, true);
    add("flaky", 0.5 * t, split == "profile" && c % 3 != 0);
  }
  return out;
}

TEST(PlanTableCompiler, FindsTheDensityRegimes) {
  const auto prof = synthetic_profile(11, 400, "profile");
  CompileOptions opt;
  opt.base_plans[kKey] = "base";
  std::vector<KeyReport> reports;
  const PlanTable table = compile_plan_table(prof, opt, &reports);
  ASSERT_EQ(table.trees.size(), 1u);
  const RegimeTree& t = table.trees.at(kKey);
  EXPECT_GE(t.rankings.size(), 2u);
  for (std::size_t l = 0; l < t.rankings.size(); ++l) {
    EXPECT_EQ(t.rankings[l].back(), "base");
    EXPECT_GE(t.leaf_cases[l], opt.min_leaf_cases);
    for (const auto& p : t.rankings[l]) EXPECT_NE(p, "flaky");
  }
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_GE(reports[0].chosen_depth, 1);

  FeatureVector sparse{16, 32768, 0.03, 0.5, 2, 10}, dense{16, 32768, 0.25, 0.5, 2, 10};
  EXPECT_EQ(table.lookup(kKey, sparse).ranking->front(), "fast_sparse");
  EXPECT_EQ(table.lookup(kKey, dense).ranking->front(), "fast_dense");
  EXPECT_EQ(table.lookup("sm80.bf16.d128.q64.kv64", sparse).tree, nullptr);

  const auto eval = synthetic_profile(12, 300, "eval");
  const RegretReport rep = evaluate_plan_table(table, eval, {{kKey, "base"}});
  EXPECT_EQ(rep.cases, 300);
  // Only cases between the bucket edge nearest 0.1 and 0.1 itself can be misrouted.
  EXPECT_LT(rep.geomean_regret, 1.05);
  EXPECT_NEAR(rep.geomean_speedup_over_direct, 1.5 / rep.geomean_regret, 1e-9);

  // Per-case outcomes: one per scored case, consistent with the aggregate and with the synthetic truth.
  ASSERT_EQ(rep.per_case.size(), 300u);
  double log_sum = 0;
  for (const CaseRegret& c : rep.per_case) {
    EXPECT_EQ(c.key, kKey);
    EXPECT_NE(c.selected_plan, "flaky");  // invalid on every evaluation case
    EXPECT_NE(c.best_plan, "flaky");
    EXPECT_TRUE(c.best_plan == "fast_sparse" || c.best_plan == "fast_dense") << c.best_plan;
    EXPECT_NEAR(c.regret, c.selected_us / c.best_us, 1e-12);
    EXPECT_GE(c.regret, 1.0);
    log_sum += std::log(c.regret);
  }
  EXPECT_NEAR(std::exp(log_sum / 300), rep.geomean_regret, 1e-12);
}

TEST(PlanTableCompiler, TooFewCasesGiveOneLeaf) {
  const auto prof = synthetic_profile(5, 40, "profile");
  CompileOptions opt;
  opt.base_plans[kKey] = "base";
  const PlanTable table = compile_plan_table(prof, opt);
  EXPECT_EQ(table.trees.at(kKey).rankings.size(), 1u);  // 40 < 2 * 32: no split allowed
}

TEST(PlanTableArtifact, JsonRoundTrip) {
  std::vector<ProfileRecord> prof = synthetic_profile(3, 200, "profile");
  const std::map<std::string, std::string> ids = {
      {"fast_sparse", kPlanA}, {"fast_dense", kPlanB}, {"base", kBasePlan}, {"flaky", kPlanC}};
  for (ProfileRecord& r : prof) r.plan = ids.at(r.plan);
  CompileOptions opt;
  opt.base_plans[kKey] = kBasePlan;
  PlanTable table = compile_plan_table(prof, opt);
  ASSERT_GT(table.trees.at(kKey).rankings.size(), 1u);  // the density split: more than one ranking round-trips
  table.catalog_version = "cat-1";
  table.arch = "sm90a";
  table.gpu_name = "NVIDIA H200";
  const std::string js = plan_table_to_json(table);
  EXPECT_EQ(plan_table_from_json(js, "cat-1"), table);
}

void expect_format_error(const std::string& js, const std::string& fragment, const std::string& catalog = "") {
  try {
    plan_table_from_json(js, catalog);
    ADD_FAILURE() << "accepted: " << js.substr(0, 80);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kFormatError);
    EXPECT_EQ(e.argument(), "plan_table");
    EXPECT_NE(e.message().find(fragment), std::string::npos) << e.message();
  }
}

TEST(PlanTableArtifact, RejectsCorruptOrMismatchedArtifacts) {
  PlanTable table;
  table.catalog_version = "cat-1";
  table.arch = "sm90a";
  RegimeTree t;
  t.key = kKey;
  t.base_plan = kBasePlan;
  t.nodes = {TreeNode{}};
  t.nodes[0].leaf = 0;
  t.rankings = {{kPlanA, kBasePlan}};
  t.leaf_cases = {40};
  table.trees[kKey] = t;
  const std::string good = plan_table_to_json(table);
  EXPECT_EQ(plan_table_from_json(good, "cat-1"), table);

  expect_format_error("{not json", "not valid JSON");
  expect_format_error("{\"format\":\"x\"}", "not a tessera plan table");
  // Versions 1 (six features, before row_imbalance), 2 (seven, before grid_rows and active_blocks), 3 (nine, before
  // coarsen_cost2/4/8) and a future version are all refused by their version.
  for (const char* other : {"1", "2", "3", "5"}) {
    std::string v = good;
    v.replace(v.find("\"format_version\": 4"), 19, std::string("\"format_version\": ") + other);
    expect_format_error(v, std::string("format_version ") + other + " is not the supported version 4");
  }
  expect_format_error(good, "does not match this build's catalog", "cat-2");
  std::string bad_rank = good;  // the ranking's last id (the base_plan field's line ends with a comma)
  const std::string last = "\"" + std::string(kBasePlan) + "\"\n";
  bad_rank.replace(bad_rank.find(last), last.size(), "\"" + std::string(kPlanB) + "\"\n");
  expect_format_error(bad_rank, "does not end with the base plan");
  std::string bad_leaf = good;
  bad_leaf.replace(bad_leaf.find("\"leaf\": 0"), 9, "\"leaf\": 7");
  expect_format_error(bad_leaf, "names leaf 7");
  std::string bad_feature = good;  // reported under "plan_table" like every other load failure
  bad_feature.replace(bad_feature.find("\"density\""), 9, "\"densityX\"");
  expect_format_error(bad_feature, "feature_schema: unknown feature name 'densityX'");
  std::string truncated = good.substr(0, good.size() / 2);
  expect_format_error(truncated, "not valid JSON");
  // The JSON parser stops at a NUL byte as at the end: a table with anything after one is refused, not read short.
  expect_format_error(good + std::string("\0garbage{{{", 11), "a NUL byte at offset " + std::to_string(good.size()));
}

// A one-leaf table of `arch` with one tree `key` whose single ranking is `ranking`, then the base plan `base`.
std::string one_tree_table(const std::string& arch, const std::string& key, std::vector<std::string> ranking,
                           const std::string& base = kBasePlan) {
  PlanTable table;
  table.catalog_version = "cat-1";
  table.arch = arch;
  RegimeTree t;
  t.key = key;
  t.base_plan = base;
  t.nodes = {TreeNode{}};
  t.nodes[0].leaf = 0;
  ranking.push_back(base);
  t.rankings = {ranking};
  t.leaf_cases = {40};
  table.trees[key] = t;
  return plan_table_to_json(table);
}

TEST(PlanTableArtifact, RejectsUnknownArchBadKeysAndPlansOfAnotherKey) {
  const std::string plan = kPlanA;  // serves kKey
  EXPECT_NO_THROW(plan_table_from_json(one_tree_table("sm90a", kKey, {plan})));
  expect_format_error(one_tree_table("sm90a", kKey, {plan, "not-a-plan-id"}),
                      "tree '" + std::string(kKey) + "' leaf 0 ranks plan 'not-a-plan-id', which does not parse");
  expect_format_error(one_tree_table("sm99", kKey, {}), "arch 'sm99' is not a known architecture");
  expect_format_error(one_tree_table("sm90a", "garbage", {}),
                      "tree key 'garbage' is not \"<arch>.<dtype>.d<D>.q<B_Q>.kv<B_KV>\"");
  expect_format_error(one_tree_table("sm90a", "sm90a.bf16.d0128.q64.kv64", {}), "tree key 'sm90a.bf16.d0128.q64.kv64' is not");
  expect_format_error(one_tree_table("sm90a", "sm80.bf16.d128.q64.kv64", {}),
                      "tree key 'sm80.bf16.d128.q64.kv64' is for arch sm80 but the table is for sm90a");
  expect_format_error(one_tree_table("sm90a", kKey, {"sm80.mma.bf16.d128.q64d.kv64d.g1.tasc.split1.s2.w4"}),
                      "leaf 0 ranks plan 'sm80.mma.bf16.d128.q64d.kv64d.g1.tasc.split1.s2.w4' of another key "
                      "('sm80.bf16.d128.q64.kv64')");
  // a family with no kernels for the arch (wgmma is sm_90a only): the table of a user who edited an sm90a table
  const std::string sm80_wgmma = "sm80.wgmma.bf16.d128.q64d.kv64d.g1.tasc.split1.s2.w8";
  expect_format_error(one_tree_table("sm80", "sm80.bf16.d128.q64.kv64", {sm80_wgmma}, kSm80Base),
                      "leaf 0 ranks plan '" + sm80_wgmma + "' of the wgmma family, which has no kernels for sm80");
  for (const char* other : {"sm90a.mma.f16.d128.q64d.kv64d.g1.tasc.split1.s2.w4",   // dtype
                            "sm90a.mma.bf16.d64.q64d.kv64d.g1.tasc.split1.s2.w4",   // head_dim
                            "sm90a.mma.bf16.d128.q32d.kv64d.g1.tasc.split1.s2.w4",  // B_Q
                            "sm90a.mma.bf16.d128.q64d.kv32d.g1.tasc.split1.s2.w4"}) // B_KV
    expect_format_error(one_tree_table("sm90a", kKey, {plan, other}), std::string("ranks plan '") + other + "'");
}

TEST(PlanTableArtifact, TableOfAnotherArchIsRejectedForThisGpu) {
  const std::string sm80 = one_tree_table("sm80", "sm80.bf16.d128.q64.kv64", {}, kSm80Base);
  EXPECT_NO_THROW(plan_table_for_arch(sm80, "sm80", "cat-1"));
  try {
    plan_table_for_arch(sm80, "sm90a", "cat-1");
    ADD_FAILURE() << "an sm80 table was accepted for an sm90a GPU";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kFormatError);
    EXPECT_EQ(e.argument(), "plan_table");
    EXPECT_EQ(e.message(), "table for sm80, this GPU is sm90a");
  }
  // The artifact's own checks still run first.
  EXPECT_THROW(plan_table_for_arch(sm80, "sm80", "cat-2"), Error);
}

TEST(RequestKeyParse, CanonicalSpellingOnly) {
  const std::optional<RequestKey> k = parse_request_key("sm90a.f16.d64.q128.kv16");
  ASSERT_TRUE(k);
  EXPECT_EQ(*k, (RequestKey{"sm90a", DType::kFloat16, 64, 128, 16}));
  EXPECT_EQ(parse_request_key(kKey)->str(), kKey);
  for (const char* bad : {"", "garbage", "sm99.bf16.d128.q64.kv64", "sm90a.f32.d128.q64.kv64", "sm90a.bf16.d128.q64",
                          "sm90a.bf16.d128.q64.kv64.x", "sm90a.bf16.d0128.q64.kv64", "sm90a.bf16.d+128.q64.kv64",
                          "sm90a.bf16.d128.q0.kv64", "sm90a.bf16.d128.q-64.kv64", "sm90a.bf16.d128.q64.kv64x",
                          "sm90a.bf16.x128.q64.kv64", "sm90a.bf16.d128.q64.kv99999999999", "SM90A.bf16.d128.q64.kv64"})
    EXPECT_FALSE(parse_request_key(bad)) << bad;
}

// Two sources of one key that want different plans and differ in sequence length, 8 requests each, 8 cases per
// request (correlated: one request's cases share their latency scale). Folds keep requests together, so every
// training fold still holds both sources and cross-validation can see that the split pays: depth >= 1, and each
// source's requests get their own plan. (With folds by source, each fold would train on one source only.)
TEST(PlanTableCompiler, FoldsByRequestLearnPerSourceRegimes) {
  std::vector<ProfileRecord> prof;
  std::mt19937_64 g(3);
  std::uniform_real_distribution<double> u(0, 1);
  for (int src = 0; src < 2; ++src)
    for (int req = 0; req < 8; ++req) {
      const double scale = 100 + 100 * u(g);
      for (int c = 0; c < 8; ++c) {
        ProfileRecord r;
        r.case_id = "s" + std::to_string(src) + "-r" + std::to_string(req) + "-c" + std::to_string(c);
        r.source = "s" + std::to_string(src);
        r.request = r.source + "#" + std::to_string(req);
        r.split = "profile";
        r.key = kKey;
        r.features = {16, src == 0 ? 27280.0 : 75600.0, 0.1, 0.5, 2, 10};
        const double t = scale * (1 + 0.02 * u(g));
        for (const auto& [plan, lat] : std::vector<std::pair<std::string, double>>{
                 {"a", src == 0 ? t : 1.3 * t}, {"b", src == 0 ? 1.3 * t : t}, {"base", 1.5 * t}}) {
          ProfileRecord x = r;
          x.plan = plan;
          x.latency_us = lat;
          x.valid = true;
          prof.push_back(x);
        }
      }
    }
  CompileOptions opt;
  opt.base_plans[kKey] = "base";
  std::vector<KeyReport> reports;
  const PlanTable table = compile_plan_table(prof, opt, &reports);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_GE(reports[0].chosen_depth, 1);
  EXPECT_EQ(table.lookup(kKey, {16, 27280, 0.1, 0.5, 2, 10}).ranking->front(), "a");
  EXPECT_EQ(table.lookup(kKey, {16, 75600, 0.1, 0.5, 2, 10}).ranking->front(), "b");
  // Records without a request (older files) fall back to folds by source: two folds, each training on one
  // source, so no split can be validated.
  for (auto& r : prof) r.request.clear();
  reports.clear();
  compile_plan_table(prof, opt, &reports);
  EXPECT_EQ(reports[0].chosen_depth, 0);
}

// The artifacts embedded in this build load against this build's catalog (a catalog.def change alters the catalog
// version and needs a re-profiled table), and every plan they rank names a catalog entry that runs on their arch.
TEST(PlanTableArtifact, EmbeddedTablesLoadAgainstThisCatalog) {
  ASSERT_FALSE(embedded_plan_tables().empty());
  for (const EmbeddedPlanTable& e : embedded_plan_tables()) {
    PlanTable t;
    ASSERT_NO_THROW(t = plan_table_from_json(std::string(e.json), std::string(catalog_version()))) << e.arch;
    EXPECT_EQ(t.arch, e.arch);
    const std::optional<Arch> arch = arch_from_name(t.arch);
    ASSERT_TRUE(arch) << t.arch;
    for (const auto& [key, tree] : t.trees) {
      for (const auto& ranking : tree.rankings) {
        for (const std::string& id : ranking) {
          const Plan p = parse_plan_id(id);
          const CatalogEntry* entry = find_plan_entry(p);
          ASSERT_NE(entry, nullptr) << id;
          EXPECT_TRUE(entry_targets(*entry, *arch)) << id;
        }
      }
    }
  }
}

TEST(ProfileRecords, JsonRoundTripAndErrors) {
  ProfileRecord r = synthetic_profile(1, 1, "eval")[0];
  const ProfileRecord back = profile_record_from_json(profile_record_to_json(r));
  EXPECT_EQ(back.case_id, r.case_id);
  EXPECT_EQ(back.features, r.features);
  EXPECT_EQ(back.plan, r.plan);
  EXPECT_DOUBLE_EQ(back.latency_us, r.latency_us);
  EXPECT_EQ(back.request, "");  // optional field, absent
  r.request = "src#3";
  EXPECT_EQ(profile_record_from_json(profile_record_to_json(r)).request, "src#3");
  EXPECT_THROW(profile_record_from_json("{\"case\":1}"), Error);
  std::string js = profile_record_to_json(r);
  js.replace(js.find("\"eval\""), 6, "\"test\"");
  try {
    profile_record_from_json(js);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("split"), std::string::npos);
  }
}

// Numbers of a record are JSON numbers: a boolean is not read as 1 (nlohmann's get<double>() would convert it).
TEST(ProfileRecords, NumbersAreJsonNumbers) {
  const std::string good = profile_record_to_json(synthetic_profile(1, 1, "eval")[0]);
  const auto expect_rejected = [](const std::string& js, const std::string& fragment) {
    expect_error([&] { profile_record_from_json(js); }, ErrorCode::kFormatError, "profile", fragment, js);
  };
  std::string js = good;
  const std::size_t at = js.find("\"latency_us\":") + 13;
  js.replace(at, js.find(',', at) - at, "true");
  expect_rejected(js, "field 'latency_us' is true, not a finite number");
  expect_rejected(std::string("{\"case\":\"F/s/0\"}\0 GARBAGE", 25), "a NUL byte at column 17");
  js = good;
  const std::size_t f = js.find("\"density\":") + 10;
  js.replace(f, js.find_first_of(",}", f) - f, "false");
  expect_rejected(js, "feature 'density' is false, not a finite number");
  // Found by tests/fuzz (regressions/profile_records/unknown_feature_name.jsonl): an unknown feature name is the
  // record's error (argument "profile"), not the feature table's ("feature").
  js = good;
  js.replace(js.find("\"density\":"), 10, "\"densityX\":");
  expect_rejected(js, "field 'features': unknown feature name 'densityX'");
}

}  // namespace
}  // namespace tessera
