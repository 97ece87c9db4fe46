// Online selection: default plans, ranking walk with eligibility, fallbacks.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "core/catalog.hpp"
#include "core/embedded_tables.hpp"
#include "core/plan_table.hpp"
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
  // 16 x 64 has an s2 and an s1 mma entry: both are enumerated, the s2 one first (catalog order); the swapped wgmma
  // entry of that tile (s2, w8) comes after them.
  const auto both = enumerate_plans(catalog(), req(16, 64));
  std::vector<int> direct_stages;
  for (const Plan& p : both)
    if (p.q.kind == MappingKind::kDirect && p.kv.kind == MappingKind::kDirect) direct_stages.push_back(p.org.stages);
  EXPECT_EQ(direct_stages, (std::vector<int>{2, 1, 2}));
}

// Plans with persistent CTAs (`g1p`) are enumerated only when asked for, right after the same plan with one CTA per
// item, and only on entries whose kernels run them: the wgmma 64- and 128-row tiles but t64x128 (Config::kPersistent),
// never the mma.sync entries or the swapped 16- and 32-row tiles.
TEST(Selector, PersistentPlansOnlyOnEntriesThatRunThem) {
  int persistent_entries = 0;
  for (const CatalogEntry& e : catalog()) {
    const bool want = e.family == KernelFamily::kWgmma && e.tile_q >= 64 && !(e.tile_q == 64 && e.tile_kv == 128);
    EXPECT_EQ(e.persistent_ctas, want) << e.name;
    persistent_entries += want;
  }
  EXPECT_GT(persistent_entries, 0);
  CandidateOptions o;
  o.splits = {1, 2};
  for (auto [bq, bkv] : {std::pair{16, 16}, {64, 64}, {128, 64}, {128, 128}, {384, 384}}) {
    SCOPED_TRACE(std::to_string(bq) + "x" + std::to_string(bkv));
    const auto plain = enumerate_plans(catalog(), req(bq, bkv), o);
    for (const Plan& p : plain) EXPECT_FALSE(p.org.persistent) << plan_id(p);
    o.include_persistent = true;
    const auto all = enumerate_plans(catalog(), req(bq, bkv), o);
    o.include_persistent = false;
    std::vector<Plan> without;
    int persistent = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (!all[i].org.persistent) {
        without.push_back(all[i]);
        continue;
      }
      ++persistent;
      ASSERT_GT(i, 0u);
      Plan one_cta_each = all[i];
      one_cta_each.org.persistent = false;
      EXPECT_EQ(all[i - 1], one_cta_each) << plan_id(all[i]);
      EXPECT_TRUE(find_plan_entry(all[i])->persistent_ctas) << plan_id(all[i]);
      EXPECT_NE(plan_id(all[i]).find(".g1p."), std::string::npos) << plan_id(all[i]);
      EXPECT_EQ(parse_plan_id(plan_id(all[i])), all[i]);
    }
    EXPECT_EQ(without, plain);  // the same plans, in the same order, besides the persistent ones
    EXPECT_GT(persistent, 0);  // every geometry here reaches a 64- or 128-row wgmma tile (Coarsened-Q for 16)
  }
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
  // A head_dim no kernel has: the error names q and lists the head_dims the build serves for the dtype.
  try {
    select_plan(catalog(), nullptr, req(64, 64, DType::kBFloat16, 96), kFeatures);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_EQ(e.argument(), "q");
    EXPECT_NE(e.message().find("head_dim 96 is not served"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("kernels have head_dim 64, 128"), std::string::npos) << e.message();
  }
  // A served head_dim on an architecture with no kernel of that family (sm80 has mma.sync only; restricted here to
  // the wgmma entries): the key-level error.
  std::vector<CatalogEntry> wgmma;
  for (const CatalogEntry& e : catalog())
    if (e.family == KernelFamily::kWgmma) wgmma.push_back(e);
  ASSERT_FALSE(wgmma.empty());
  auto r = req(64, 64);
  r.arch = Arch::kSm80;
  try {
    select_plan(wgmma, nullptr, r, kFeatures);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_EQ(e.argument(), "request");
    EXPECT_NE(e.message().find("sm80.bf16.d128.q64.kv64"), std::string::npos) << e.message();
  }
}

void expect_same(const Selection& a, const Selection& b, const std::string& what) {
  EXPECT_EQ(a.plan, b.plan) << what;
  EXPECT_EQ(a.plan_id, b.plan_id) << what;
  EXPECT_EQ(a.source, b.source) << what;
  EXPECT_EQ(a.regime, b.regime) << what;
  EXPECT_EQ(a.ranks_skipped, b.ranks_skipped) << what;
}

// RequestSelections (the runtime's per-request memo, built before mu(M) is known) answers exactly as select_plan for
// random features over the embedded sm90a table's keys, the bucket edges included, with and without a workspace limit
// that makes the split-KV plans ineligible (ranks skipped, base and default fallbacks).
TEST(Selector, EveryRegimeMemoAnswersAsSelectPlan) {
  const std::string_view js = embedded_plan_table("sm90a");
  if (js.empty()) GTEST_SKIP() << "no embedded sm90a table in this build";
  const PlanTable table = plan_table_from_json(std::string(js), std::string(catalog_version()));
  std::mt19937_64 g(11);
  int checked = 0, with_tree = 0, skipped_some = 0;
  for (auto [bq, bkv] : {std::pair{16, 16}, {32, 16}, {32, 32}, {64, 32}, {64, 64}, {128, 64}, {128, 128}, {384, 384}}) {
    for (std::int64_t limit : {std::int64_t{-1}, std::int64_t{1}}) {
      EligibilityRequest r = req(bq, bkv);
      r.query_tiles = 4096;
      r.max_workspace_bytes = limit;
      SelectorCache cache;
      const RequestSelections memo = select_for_every_regime(catalog(), &table, r, &cache);
      EXPECT_EQ(memo.request, r);
      with_tree += memo.tree != nullptr;
      // The runtime counts the coarsened pairs only where the key's tree reads them (the embedded table: Q16K16).
      bool reads = false;
      for (const TreeNode& n : memo.tree ? memo.tree->nodes : std::vector<TreeNode>{})
        reads = reads || n.feature == static_cast<int>(Feature::kCoarsenCost2) ||
                n.feature == static_cast<int>(Feature::kCoarsenCost4) || n.feature == static_cast<int>(Feature::kCoarsenCost8);
      EXPECT_EQ(memo.reads_coarsen_cost, reads) << request_key(r).str();
      if (bq == 16) {
        EXPECT_TRUE(memo.reads_coarsen_cost);
      }
      if (bq == 64 && bkv == 64) {
        EXPECT_FALSE(memo.reads_coarsen_cost);
      }
      for (int i = 0; i < 200; ++i) {
        FeatureVector f{};
        for (int k = 0; k < kFeatureCount; ++k) {
          const std::vector<double>& edges = table.schema.edges[k];
          const double top = edges.empty() ? 1.0 : edges.back();
          f[k] = !edges.empty() && g() % 2 ? edges[g() % edges.size()]  // exactly on an edge
                                           : std::uniform_real_distribution<double>(0, 1.5 * top)(g);
        }
        const Selection want = select_plan(catalog(), &table, r, f, &cache);
        const Selection& got = memo.select(f);
        expect_same(got, want, request_key(r).str() + " limit " + std::to_string(limit));
        skipped_some += want.ranks_skipped > 0;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 8 * 2 * 200);
  EXPECT_GT(with_tree, 0);
  EXPECT_GT(skipped_some, 0);  // the workspace limit made ranked split-KV plans ineligible
}

// A key with a tree whose leaf has no eligible plan and no default plan: the memo builds, and select() raises
// select_plan's error for that leaf only.
TEST(Selector, EveryRegimeMemoKeepsTheNoKernelError) {
  const auto r = req(64, 64, DType::kBFloat16, 96);  // no d96 kernel
  PlanTable table;
  RegimeTree t;
  t.key = request_key(r).str();
  t.base_plan = "garbage.id";
  t.nodes = {TreeNode{}};
  t.nodes[0].leaf = 0;
  t.rankings = {{"garbage.id"}};
  table.trees[t.key] = t;
  const RequestSelections memo = select_for_every_regime(catalog(), &table, r);
  ASSERT_EQ(memo.by_leaf.size(), 1u);
  EXPECT_FALSE(memo.by_leaf[0].has_value());
  std::string want;
  try {
    select_plan(catalog(), &table, r, kFeatures);
  } catch (const Error& e) {
    want = e.message();
  }
  ASSERT_FALSE(want.empty());
  try {
    memo.select(kFeatures);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_EQ(e.argument(), "q");  // head_dim 96: no kernel has it
    EXPECT_EQ(e.message(), want);
  }
}

TEST(Catalog, VersionIsStable) {
  EXPECT_EQ(catalog_version().substr(0, 4), "cat-");
  EXPECT_EQ(catalog_version().size(), 20u);
  EXPECT_EQ(catalog_version(), catalog_version());
}

}  // namespace
}  // namespace tessera
