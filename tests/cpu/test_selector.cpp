// Online selection: default plans, ranking walk with eligibility, fallbacks.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/catalog.hpp"
#include "core/selector.hpp"
#include "tessera/error.hpp"

namespace tessera {
namespace {

EligibilityRequest req(int bq, int bkv, DType t = DType::kBFloat16, int d = 128) {
  EligibilityRequest r;
  r.arch = Arch::kSm90a;
  r.dtype = t;
  r.head_dim = d;
  r.block_q = bq;
  r.block_kv = bkv;
  return r;
}

const FeatureVector kFeatures{16, 32768, 0.1, 0.5, 2, 50};

TEST(Selector, DefaultIsDirectWhenATileMatches) {
  const auto p = default_plan(catalog(), req(64, 64));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->q.kind, MappingKind::kDirect);
  EXPECT_EQ(p->kv.kind, MappingKind::kDirect);
  EXPECT_EQ(p->tile_q(), 64);
  EXPECT_EQ(p->org.split, 1);
  const auto d = direct_plan(catalog(), req(64, 64));
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, *p);
}

TEST(Selector, LargeBlocksAreRefinedToACompiledTile) {
  const auto p = default_plan(catalog(), req(384, 384));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->q.kind, MappingKind::kRefine);
  EXPECT_EQ(p->kv.kind, MappingKind::kRefine);
  EXPECT_EQ(p->tile_q() * p->q.factor, 384);
  EXPECT_NE(find_plan_entry(*p), nullptr);
  EXPECT_FALSE(direct_plan(catalog(), req(384, 384)));  // no 384-token tile in the catalog
}

TEST(Selector, EveryEnumeratedPlanIsEligibleAndRoundTrips) {
  CandidateOptions o;
  o.splits = {1, 2, 4};
  o.traversals = {Traversal::kAscending, Traversal::kRunMajor};
  for (auto [bq, bkv] : {std::pair{16, 16}, {32, 16}, {64, 64}, {128, 128}, {384, 384}}) {
    const auto plans = enumerate_plans(catalog(), req(bq, bkv), o);
    EXPECT_FALSE(plans.empty()) << bq << "x" << bkv;
    for (const Plan& p : plans) {
      const CatalogEntry* e = find_plan_entry(p);
      ASSERT_NE(e, nullptr);
      EXPECT_TRUE(eligible(p, *e, req(bq, bkv)).ok);
      EXPECT_EQ(parse_plan_id(plan_id(p)), p);
      EXPECT_EQ(p.block_q, bq);
    }
  }
}

// Entries with one pipeline stage (names ending .s1) are reachable: enumerated, eligible, and the default plan
// of a geometry only such an entry serves Directly.
TEST(Selector, OneStageEntriesAreEnumerated) {
  int s1_entries = 0;
  for (const CatalogEntry& e : catalog()) {
    if (e.stages != 1) continue;
    ++s1_entries;
    // The Direct plan with B = T on the entry's tile.
    const auto r = req(e.tile_q, e.tile_kv, e.dtype, e.head_dim);
    const auto plans = enumerate_plans(catalog(), r);
    const bool found = std::any_of(plans.begin(), plans.end(), [&](const Plan& p) {
      return p.org.stages == 1 && p.q.kind == MappingKind::kDirect && p.kv.kind == MappingKind::kDirect &&
             plan_kernel_name(p) == e.name;
    });
    EXPECT_TRUE(found) << e.name;
  }
  EXPECT_GT(s1_entries, 0);
  // 16 x 128: only mma.bf16.d128.t16x128.w4.s1 has that tile, so the Direct (and default) plan runs it.
  const auto d = direct_plan(catalog(), req(16, 128));
  ASSERT_TRUE(d);
  EXPECT_EQ(plan_id(*d), "sm90a.mma.bf16.d128.q16d.kv128d.g1.tasc.split1.s1.w4");
  EXPECT_EQ(find_plan_entry(*d)->name, "mma.bf16.d128.t16x128.w4.s1");
  EXPECT_EQ(*default_plan(catalog(), req(16, 128)), *d);
  // 16 x 64 has an s2 and an s1 entry: both are enumerated, the s2 one first (catalog order).
  const auto both = enumerate_plans(catalog(), req(16, 64));
  std::vector<int> direct_stages;
  for (const Plan& p : both)
    if (p.q.kind == MappingKind::kDirect && p.kv.kind == MappingKind::kDirect) direct_stages.push_back(p.org.stages);
  EXPECT_EQ(direct_stages, (std::vector<int>{2, 1}));
}

TEST(Selector, WalksTheRankingSkippingIneligiblePlans) {
  const auto r = req(64, 64);
  const std::string key = request_key(r).str();
  const Plan base = *default_plan(catalog(), r);
  CandidateOptions o;
  o.splits = {2};
  const auto split_plans = enumerate_plans(catalog(), r, o);
  ASSERT_FALSE(split_plans.empty());
  Plan other_dtype = split_plans.front();
  other_dtype.dtype = DType::kFloat16;  // parses, but not eligible for a bf16 request

  PlanTable table;
  RegimeTree t;
  t.key = key;
  t.base_plan = plan_id(base);
  t.nodes = {TreeNode{}};
  t.nodes[0].leaf = 0;
  t.rankings = {{"garbage.id", plan_id(other_dtype), plan_id(split_plans.front()), plan_id(base)}};
  table.trees[key] = t;

  const Selection s = select_plan(catalog(), &table, r, kFeatures);
  EXPECT_EQ(s.source, SelectionSource::kTable);
  EXPECT_EQ(s.plan, split_plans.front());
  EXPECT_EQ(s.ranks_skipped, 2);
  EXPECT_EQ(s.regime, key + "/leaf0");

  // A cache warmed from the table (as the Runtime does at load) holds every ranked id, the unparsable one as
  // nullopt, and gives the same selection.
  SelectorCache cache;
  warm_selector_cache(table, cache);
  EXPECT_EQ(cache.parsed.size(), 4u);
  ASSERT_TRUE(cache.parsed.count("garbage.id"));
  EXPECT_FALSE(cache.parsed.at("garbage.id").has_value());
  EXPECT_EQ(cache.parsed.at(plan_id(base)), base);
  const Selection sc = select_plan(catalog(), &table, r, kFeatures, &cache);
  EXPECT_EQ(sc.plan, s.plan);
  EXPECT_EQ(sc.ranks_skipped, 2);
  EXPECT_EQ(cache.parsed.size(), 4u);  // nothing parsed on the request path

  table.trees[key].rankings = {{plan_id(other_dtype), plan_id(base)}};
  const Selection b = select_plan(catalog(), &table, r, kFeatures);
  EXPECT_EQ(b.source, SelectionSource::kBase);
  EXPECT_EQ(b.plan, base);

  const Selection d = select_plan(catalog(), nullptr, req(32, 32), kFeatures);
  EXPECT_EQ(d.source, SelectionSource::kDefault);
  EXPECT_EQ(d.regime, "sm90a.bf16.d128.q32.kv32/default");
}

TEST(Selector, NoKernelForTheKeyIsAPreciseError) {
  try {
    select_plan(catalog(), nullptr, req(64, 64, DType::kBFloat16, 96), kFeatures);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_EQ(e.argument(), "request");
    EXPECT_NE(e.message().find("sm90a.bf16.d96.q64.kv64"), std::string::npos) << e.message();
  }
}

TEST(Catalog, VersionIsStable) {
  EXPECT_EQ(catalog_version().substr(0, 4), "cat-");
  EXPECT_EQ(catalog_version().size(), 20u);
  EXPECT_EQ(catalog_version(), catalog_version());
}

}  // namespace
}  // namespace tessera
