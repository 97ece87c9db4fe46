// Eligible(P, R): pure host function of plan, catalog entry and request features.
#include <gtest/gtest.h>

#include <vector>

#include "core/arch_limits.hpp"
#include "core/catalog.hpp"
#include "core/eligibility.hpp"
#include "core/selector.hpp"

namespace tessera {
namespace {

// A synthetic catalog: Mma entries for tiles 16..128 in both dims, D 64/128, bf16/fp16, w4, s2 and s3;
// one Wgmma entry.
std::vector<CatalogEntry> synthetic_catalog() {
  std::vector<CatalogEntry> v;
  for (DType t : {DType::kBFloat16, DType::kFloat16})
    for (int d : {64, 128})
      for (int tq : {16, 32, 64, 128})
        for (int tk : {16, 32, 64, 128})
          for (int s : {2, 3}) v.push_back(CatalogEntry{"synthetic", KernelFamily::kMma, t, d, tq, tk, 4, s});
  v.push_back(CatalogEntry{"wg", KernelFamily::kWgmma, DType::kBFloat16, 128, 128, 128, 12, 2});
  return v;
}

EligibilityRequest request(int bq, int bkv) {
  EligibilityRequest r;
  r.arch = Arch::kSm90a;
  r.dtype = DType::kBFloat16;
  r.head_dim = 128;
  r.block_q = bq;
  r.block_kv = bkv;
  return r;
}

TEST(Eligibility, DirectPlanMatchesItsEntry) {
  const auto cat = synthetic_catalog();
  const Plan p = parse_plan_id("sm90a.mma.bf16.d128.q64d.kv64d.g1.tasc.split1.s2.w4");
  const CatalogEntry* e = find_plan_entry(p, cat);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->tile_q, 64);
  EXPECT_EQ(e->tile_kv, 64);
  EXPECT_TRUE(eligible(p, *e, request(64, 64)).ok);
  // Geometry of the request differs from the plan's.
  const auto r = eligible(p, *e, request(128, 64));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find("block_q"), std::string::npos) << r.reason;
}

TEST(Eligibility, MappedTileMustEqualEntryTile) {
  const auto cat = synthetic_catalog();
  const Plan c2 = parse_plan_id("sm90a.mma.bf16.d128.q32c2.kv64r2.g1.tasc.split1.s2.w4");  // T = 64 x 32
  const CatalogEntry* e = find_plan_entry(c2, cat);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->tile_q, 64);
  EXPECT_EQ(e->tile_kv, 32);
  EXPECT_TRUE(eligible(c2, *e, request(32, 64)).ok);
  const CatalogEntry* e64 = find_plan_entry(parse_plan_id("sm90a.mma.bf16.d128.q64d.kv64d.g1.tasc.split1.s2.w4"), cat);
  ASSERT_NE(e64, nullptr);
  const auto r = eligible(c2, *e64, request(32, 64));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find("tile_kv"), std::string::npos) << r.reason;
  // No entry with a 256-token tile in the synthetic catalog.
  EXPECT_EQ(find_plan_entry(parse_plan_id("sm90a.mma.bf16.d128.q64c4.kv64d.g1.tasc.split1.s2.w4"), cat), nullptr);
}

TEST(Eligibility, RefinedNeedsDivisibleBlockOfAtLeast16) {
  Plan p = parse_plan_id("sm90a.mma.bf16.d128.q64r4.kv64d.g1.tasc.split1.s2.w4");
  const CatalogEntry e{"x", KernelFamily::kMma, DType::kBFloat16, 128, 16, 64, 4, 2};
  EXPECT_TRUE(eligible(p, e, request(64, 64)).ok);
  p.block_q = 32;  // 32 / 4 = 8 < 16
  const auto r = eligible(p, e, request(32, 64));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find("plan.q.factor"), std::string::npos) << r.reason;
  p.block_q = 48;  // 48 / 4 = 12
  EXPECT_FALSE(eligible(p, e, request(48, 64)).ok);
}

TEST(Eligibility, FamilyArchDtypeHeadDimStagesWarps) {
  const auto cat = synthetic_catalog();
  const Plan wg = parse_plan_id("sm90a.wgmma.bf16.d128.q128d.kv128d.g1.tasc.split1.s2.w12");
  const CatalogEntry* e = find_plan_entry(wg, cat);
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(eligible(wg, *e, request(128, 128)).ok);
  EligibilityRequest r = request(128, 128);
  Plan wg80 = wg;
  wg80.arch = Arch::kSm80;
  r.arch = Arch::kSm80;
  auto res = eligible(wg80, *e, r);
  EXPECT_FALSE(res.ok);
  EXPECT_NE(res.reason.find("not built for sm80"), std::string::npos) << res.reason;
  EXPECT_FALSE(eligible(wg, *e, r).ok);  // plan arch != request arch
  const Plan mma = parse_plan_id("sm80.mma.bf16.d128.q64d.kv64d.g1.tasc.split1.s3.w4");
  const CatalogEntry* em = find_plan_entry(mma, cat);
  ASSERT_NE(em, nullptr);
  r = request(64, 64);
  r.arch = Arch::kSm80;
  EXPECT_TRUE(eligible(mma, *em, r).ok);
  r.arch = Arch::kSm120;
  EXPECT_FALSE(eligible(mma, *em, r).ok);
  Plan m120 = mma;
  m120.arch = Arch::kSm120;
  EXPECT_TRUE(eligible(m120, *em, r).ok);
  r.dtype = DType::kFloat16;
  EXPECT_NE(eligible(m120, *em, r).reason.find("dtype"), std::string::npos);
  r.dtype = DType::kBFloat16;
  r.head_dim = 64;
  EXPECT_NE(eligible(m120, *em, r).reason.find("head_dim"), std::string::npos);
  r.head_dim = 128;
  CatalogEntry s2 = *em;
  s2.stages = 2;
  EXPECT_NE(eligible(m120, s2, r).reason.find("stages"), std::string::npos);
  CatalogEntry w8 = *em;
  w8.warps = 8;
  EXPECT_NE(eligible(m120, w8, r).reason.find("warps"), std::string::npos);
  CatalogEntry fam = *em;
  fam.family = KernelFamily::kWgmma;
  EXPECT_NE(eligible(m120, fam, r).reason.find("family"), std::string::npos);
}

TEST(Eligibility, SplitWorkspaceLimit) {
  const Plan p = parse_plan_id("sm90a.mma.bf16.d128.q64d.kv64d.g1.tasc.split4.s2.w4");
  const CatalogEntry e{"x", KernelFamily::kMma, DType::kBFloat16, 128, 64, 64, 4, 2};
  EligibilityRequest r = request(64, 64);
  r.query_tiles = 100;
  const std::int64_t need = split_workspace_bytes_bound(p, 100);
  EXPECT_EQ(need, 100LL * 4 * 64 * 129 * 4);
  r.max_workspace_bytes = need;
  EXPECT_TRUE(eligible(p, e, r).ok);
  r.max_workspace_bytes = need - 1;
  EXPECT_NE(eligible(p, e, r).reason.find("workspace"), std::string::npos);
}

TEST(Eligibility, EntryMustFitTheArchSharedMemory) {
  EXPECT_EQ(max_dynamic_smem_bytes(Arch::kSm80), 166912u);
  EXPECT_EQ(max_dynamic_smem_bytes(Arch::kSm86), 101376u);
  EXPECT_EQ(max_dynamic_smem_bytes(Arch::kSm89), 101376u);
  EXPECT_EQ(max_dynamic_smem_bytes(Arch::kSm90a), 232448u);
  EXPECT_EQ(max_dynamic_smem_bytes(Arch::kSm120), 101376u);
  // A synthetic entry one byte over / exactly at the 99 KB limit of sm86.
  CatalogEntry e{"x", KernelFamily::kMma, DType::kBFloat16, 128, 64, 64, 4, 2, 101377};
  EligibilityRequest r = request(64, 64);
  r.arch = Arch::kSm86;
  Plan p = parse_plan_id("sm86.mma.bf16.d128.q64d.kv64d.g1.tasc.split1.s2.w4");
  const auto res = eligible(p, e, r);
  EXPECT_FALSE(res.ok);
  EXPECT_NE(res.reason.find("smem: entry x needs 101377 bytes"), std::string::npos) << res.reason;
  EXPECT_NE(res.reason.find("sm86 limit 101376"), std::string::npos) << res.reason;
  e.smem_bytes = 101376;
  EXPECT_TRUE(eligible(p, e, r).ok);
  e.smem_bytes = 101377;
  p.arch = r.arch = Arch::kSm80;
  EXPECT_TRUE(eligible(p, e, r).ok);
}

// The real catalog: entry smem comes from the kernels' Config; values pinned to docs/kernels_mma.md's ptxas table.
TEST(Eligibility, CatalogEntriesOverNinetyNineKilobytesSkipSm86Sm89Sm120) {
  const CatalogEntry* big = find_catalog_entry("mma.bf16.d128.t128x128.w8.s2");
  const CatalogEntry* s3 = find_catalog_entry("mma.bf16.d128.t64x64.w4.s3");
  const CatalogEntry* fits = find_catalog_entry("mma.bf16.d128.t128x64.w8.s2");
  ASSERT_TRUE(big && s3 && fits);
  EXPECT_EQ(big->smem_bytes, 163968u);
  EXPECT_EQ(s3->smem_bytes, 114880u);
  EXPECT_EQ(fits->smem_bytes, 98432u);
  for (Arch a : {Arch::kSm86, Arch::kSm89, Arch::kSm120}) {
    EXPECT_FALSE(entry_targets(*big, a)) << arch_name(a);
    EXPECT_FALSE(entry_targets(*s3, a)) << arch_name(a);
    EXPECT_TRUE(entry_targets(*fits, a)) << arch_name(a);
  }
  for (Arch a : {Arch::kSm80, Arch::kSm90a}) {
    EXPECT_TRUE(entry_targets(*big, a)) << arch_name(a);
    EXPECT_TRUE(entry_targets(*s3, a)) << arch_name(a);
  }
  EXPECT_EQ(entry_architectures(*big), (std::vector<Arch>{Arch::kSm80, Arch::kSm90a}));
  // Every catalog entry states its shared memory and runs somewhere (sm90a has the largest limit).
  for (const CatalogEntry& e : catalog()) {
    if (e.family != KernelFamily::kMma) continue;
    EXPECT_GT(e.smem_bytes, 0u) << e.name;
    EXPECT_TRUE(entry_targets(e, Arch::kSm90a)) << e.name;
  }
}

// Selection never picks an entry that cannot launch on the request's arch: enumerate every plan of every
// architecture over the real catalog and check each plan's entry fits.
TEST(Eligibility, EnumerationRespectsPerArchSharedMemory) {
  CandidateOptions o;
  o.splits = {1, 2};
  for (Arch a : {Arch::kSm80, Arch::kSm86, Arch::kSm89, Arch::kSm90a, Arch::kSm120}) {
    for (auto [bq, bkv] : {std::pair{64, 64}, {128, 128}, {64, 128}, {32, 32}, {16, 64}}) {
      EligibilityRequest r = request(bq, bkv);
      r.arch = a;
      bool saw_t128x128 = false;
      for (const Plan& p : enumerate_plans(catalog(), r, o)) {
        const CatalogEntry* e = find_plan_entry(p);
        ASSERT_NE(e, nullptr);
        EXPECT_LE(e->smem_bytes, max_dynamic_smem_bytes(a)) << plan_id(p);
        saw_t128x128 = saw_t128x128 || e->name == "mma.bf16.d128.t128x128.w8.s2";
      }
      const bool big_ok = a == Arch::kSm80 || a == Arch::kSm90a;
      if (bq == 128 && bkv == 128) {
        EXPECT_EQ(saw_t128x128, big_ok) << arch_name(a);
      }
      const auto d = default_plan(catalog(), r);
      ASSERT_TRUE(d) << arch_name(a) << " " << bq << "x" << bkv;
      EXPECT_TRUE(entry_targets(*find_plan_entry(*d), a)) << plan_id(*d);
    }
  }
}

TEST(Catalog, HostTableAndFamilies) {
  ASSERT_FALSE(catalog().empty());
  for (const CatalogEntry& e : catalog()) {
    EXPECT_EQ(find_catalog_entry(e.name), &e);
    EXPECT_GT(e.tile_q, 0);
    EXPECT_GT(e.tile_kv, 0);
  }
  EXPECT_EQ(find_catalog_entry("no.such.entry"), nullptr);
  EXPECT_EQ(family_architectures(KernelFamily::kMma).size(), 5u);
  EXPECT_TRUE(family_targets(KernelFamily::kMma, Arch::kSm120));
  EXPECT_TRUE(family_targets(KernelFamily::kWgmma, Arch::kSm90a));
  EXPECT_FALSE(family_targets(KernelFamily::kWgmma, Arch::kSm89));
}

// The swapped wgmma entries (T_Q = 16 / 32 x T_KV = 64, src/kernels/wgmma/consumer_swap.cuh) serve the small query
// blocks on sm90a only, through the ordinary plan ids, eligibility and enumeration: Direct-Q with packed or
// Coarsened-KV tiles of 64 kv rows, Coarsened-Q (16 -> 32) and Refined-Q (64 -> 16 / 32).
TEST(Catalog, SwappedWgmmaEntriesServeSmallQueryBlocks) {
  struct Want { const char* id; int bq, bkv; const char* entry; };
  for (const Want w : {Want{"sm90a.wgmma.bf16.d128.q16d.kv16p4.g1.tasc.split1.s2.w8", 16, 16, "wgmma.bf16.d128.t16x64.w8.s2"},
                       Want{"sm90a.wgmma.bf16.d128.q16d.kv16c4.g1.tasc.split1.s2.w8", 16, 16, "wgmma.bf16.d128.t16x64.w8.s2"},
                       Want{"sm90a.wgmma.bf16.d128.q32d.kv16p4.g1.tasc.split1.s2.w8", 32, 16, "wgmma.bf16.d128.t32x64.w8.s2"},
                       Want{"sm90a.wgmma.bf16.d128.q32d.kv32p2.g1.tasc.split1.s2.w8", 32, 32, "wgmma.bf16.d128.t32x64.w8.s2"},
                       Want{"sm90a.wgmma.bf16.d128.q16c2.kv32p2.g1.tasc.split1.s2.w8", 16, 32, "wgmma.bf16.d128.t32x64.w8.s2"},
                       Want{"sm90a.wgmma.bf16.d128.q64r2.kv64d.g1.tasc.split2.s2.w8", 64, 64, "wgmma.bf16.d128.t32x64.w8.s2"},
                       Want{"sm90a.wgmma.f16.d128.q32d.kv32p2.g1.tasc.split1.s2.w8", 32, 32, "wgmma.f16.d128.t32x64.w8.s2"},
                       Want{"sm90a.wgmma.bf16.d64.q32d.kv16p4.g1.tasc.split1.s2.w8", 32, 16, "wgmma.bf16.d64.t32x64.w8.s2"}}) {
    SCOPED_TRACE(w.id);
    const Plan p = parse_plan_id(w.id);
    const CatalogEntry* e = find_plan_entry(p);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->name, w.entry);
    EligibilityRequest r = request(w.bq, w.bkv);
    r.dtype = p.dtype;
    r.head_dim = p.head_dim;
    EXPECT_TRUE(eligible(p, *e, r).ok) << eligible(p, *e, r).reason;
    const std::vector<Plan> all = enumerate_plans(catalog(), r, CandidateOptions{{1, 2}});
    bool listed = false;
    for (const Plan& q : all) listed = listed || plan_id(q) == w.id;
    EXPECT_TRUE(listed) << "enumerate_plans lists it";
    EXPECT_EQ(entry_architectures(*e), std::vector<Arch>{Arch::kSm90a});
    Plan p80 = p;
    p80.arch = Arch::kSm80;
    r.arch = Arch::kSm80;
    EXPECT_NE(eligible(p80, *e, r).reason.find("not built for sm80"), std::string::npos);
  }
  // Shared memory: three t16x64 CTAs per SM (228 KB, 1 KB reserved each), two t32x64 ones (the kernels'
  // __launch_bounds__ ask for as many; src/kernels/wgmma/config.cuh).
  const CatalogEntry* t16 = find_catalog_entry("wgmma.bf16.d128.t16x64.w8.s2");
  const CatalogEntry* t32 = find_catalog_entry("wgmma.bf16.d128.t32x64.w8.s2");
  ASSERT_NE(t16, nullptr);
  ASSERT_NE(t32, nullptr);
  EXPECT_LE(3 * (t16->smem_bytes + 1024), 228u * 1024);
  EXPECT_LE(2 * (t32->smem_bytes + 1024), 228u * 1024);
  EXPECT_GT(3 * (t32->smem_bytes + 1024), 228u * 1024);
}

}  // namespace
}  // namespace tessera
