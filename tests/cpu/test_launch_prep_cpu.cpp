// CPU launch-preparation builders: hand-checked metadata and invariants.
#include <gtest/gtest.h>

#include "core/launch_prep.hpp"
#include "core/query_tiles.hpp"
#include "plan_test_util.hpp"
#include "tessera/error.hpp"
#include "tessera/geometry.hpp"

#include <random>

namespace tessera {
namespace {

using plan_testing::DenseBlockMask;
using plan_testing::host_mask_state;

Plan plan_of(const std::string& q, const std::string& kv, const std::string& org = "g1.tasc.split1") {
  return parse_plan_id("sm90a.mma.bf16.d64." + q + "." + kv + "." + org + ".s2.w4");
}

// One head, 3 query blocks x 6 kv blocks of 16 tokens; N_q = 40 (ragged), N_kv = 90 (ragged).
//   row 0: 1 2 4
//   row 1: 0 5
//   row 2: (empty)
DenseBlockMask small_mask() {
  DenseBlockMask m(1, 1, 3, 6);
  m.at(0, 0, 0, 1) = m.at(0, 0, 0, 2) = m.at(0, 0, 0, 4) = 1;
  m.at(0, 0, 1, 0) = m.at(0, 0, 1, 5) = 1;
  return m;
}
const PrepProblem kSmall{1, 1, 1, 40, 90, 64};

TEST(LaunchPrepCpu, DirectIsTheMaskCsr) {
  const auto ms = host_mask_state(small_mask());
  const auto md = prepare_plan_cpu(plan_of("q16d", "kv16d"), ms, kSmall);
  check_tile_metadata(md);
  EXPECT_EQ(md.tile_row_offsets, ms.row_offsets);
  EXPECT_EQ(md.kv_tile, ms.col_indices);
  EXPECT_TRUE(md.member.empty());
  ASSERT_EQ(md.items.size(), 3u);
  EXPECT_EQ(md.items[2].q_start, 32);
  EXPECT_EQ(md.items[2].q_len, 8);
  EXPECT_EQ(md.items[2].entry_begin, md.items[2].entry_end);
  EXPECT_EQ(md.n_partials, 0);
}

TEST(LaunchPrepCpu, CoarsenedSpanBuildsMembership) {
  const auto ms = host_mask_state(small_mask());
  const auto md = prepare_plan_cpu(plan_of("q16c2", "kv16c2"), ms, kSmall);
  check_tile_metadata(md);
  // tile row 0 = logical rows 0, 1; kv tiles: 0 {(1,0)}, 1 {(0,0)}, 2 {(0,0), (1,1)}; row 1 = logical row 2: empty
  EXPECT_EQ(md.tile_row_offsets, (std::vector<std::int32_t>{0, 3, 3}));
  EXPECT_EQ(md.kv_tile, (std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_EQ(md.member, (std::vector<std::uint64_t>{(1ull << 1) | (1ull << 8), 1ull, 1ull | (1ull << 9)}));
  ASSERT_EQ(md.items.size(), 2u);
  EXPECT_EQ(md.items[1].q_len, 8);
  EXPECT_EQ(md.sub_q, 16);
  EXPECT_EQ(md.sub_kv, 16);
}

TEST(LaunchPrepCpu, PackedGroupsActiveBlocksInOrder) {
  const auto ms = host_mask_state(small_mask());
  const auto md = prepare_plan_cpu(plan_of("q16d", "kv16p2"), ms, kSmall);
  check_tile_metadata(md);
  EXPECT_EQ(md.tile_row_offsets, (std::vector<std::int32_t>{0, 2, 3, 3}));
  EXPECT_EQ(md.gather_blocks, (std::vector<std::int32_t>{1, 2, 4, -1, 0, 5}));
  EXPECT_EQ(md.member, (std::vector<std::uint64_t>{3, 1, 3}));
  EXPECT_TRUE(md.kv_tile.empty());
  // Coarsened-Q x packed: union of rows 0 and 1 = {0, 1, 2, 4, 5}
  const auto mc = prepare_plan_cpu(plan_of("q16c2", "kv16p4"), ms, kSmall);
  check_tile_metadata(mc);
  EXPECT_EQ(mc.gather_blocks, (std::vector<std::int32_t>{0, 1, 2, 4, 5, -1, -1, -1}));
  EXPECT_EQ(mc.member, (std::vector<std::uint64_t>{(1ull << 8) | 2 | 4 | 8, 1ull << 8}));
}

TEST(LaunchPrepCpu, RefinedKvExpandsBlocksAndDropsTilesPastTheSequence) {
  // B_KV = 32: 3 kv blocks for N_kv = 90; r2 -> T_KV = 16, 6 kv tiles (last one covers 80..90).
  DenseBlockMask m(1, 1, 3, 3);
  m.at(0, 0, 0, 2) = 1;
  m.at(0, 0, 1, 0) = 1;
  const PrepProblem pr{1, 1, 1, 40, 90, 64};
  const auto md = prepare_plan_cpu(plan_of("q16d", "kv32r2"), host_mask_state(m), pr);
  check_tile_metadata(md);
  EXPECT_EQ(md.kv_tile, (std::vector<std::int32_t>{4, 5, 0, 1}));
  // N_kv = 70: kv block 2 covers 64..70, only one refined tile (64..80) exists.
  const PrepProblem pr70{1, 1, 1, 40, 70, 64};
  const auto m70 = prepare_plan_cpu(plan_of("q16d", "kv32r2"), host_mask_state(m), pr70);
  EXPECT_EQ(m70.kv_tile, (std::vector<std::int32_t>{4, 0, 1}));
}

TEST(LaunchPrepCpu, RefinedQReusesLogicalRows) {
  DenseBlockMask m(1, 1, 2, 6);  // B_Q = 32: N_q = 40 -> 2 blocks; r2 -> T_Q = 16, 3 query tiles
  m.at(0, 0, 0, 3) = 1;
  m.at(0, 0, 1, 1) = 1;
  const auto md = prepare_plan_cpu(plan_of("q32r2", "kv16d"), host_mask_state(m), kSmall);
  check_tile_metadata(md);
  ASSERT_EQ(md.items.size(), 3u);
  EXPECT_EQ(md.items[0].tile_row, 0);
  EXPECT_EQ(md.items[1].tile_row, 0);
  EXPECT_EQ(md.items[2].tile_row, 1);
  EXPECT_EQ(md.items[2].q_len, 8);
}

TEST(LaunchPrepCpu, SplitKvPartitionsAndMergeIndex) {
  DenseBlockMask m(1, 1, 3, 8);
  for (int c = 0; c < 7; ++c) m.at(0, 0, 0, c) = 1;  // 7 tiles -> 4 partitions: 1, 2, 2, 2 (floor(7j/4))
  m.at(0, 0, 1, 3) = 1;                              // 1 tile -> direct
  const PrepProblem pr{1, 1, 1, 48, 128, 64};
  const auto md = prepare_plan_cpu(plan_of("q16d", "kv16d", "g1.tasc.split4"), host_mask_state(m), pr);
  check_tile_metadata(md);
  ASSERT_EQ(md.items.size(), 6u);
  EXPECT_EQ(md.items[0].entry_begin, 0);
  EXPECT_EQ(md.items[0].entry_end, 1);
  EXPECT_EQ(md.items[1].entry_end, 3);
  EXPECT_EQ(md.items[3].entry_end, 7);
  EXPECT_EQ(md.items[3].partial, 3);
  EXPECT_EQ(md.items[4].partial, -1);
  EXPECT_EQ(md.items[5].partial, -1);  // empty row: one direct item
  EXPECT_EQ(md.n_partials, 4);
  EXPECT_EQ(md.merge_offsets, (std::vector<std::int32_t>{0, 4}));
  ASSERT_EQ(md.merge_targets.size(), 1u);
  EXPECT_EQ(md.merge_targets[0].q_start, 0);
  // A row with 3 tiles under split 8 gets 3 partials.
  const auto m8 = prepare_plan_cpu(plan_of("q16d", "kv16d", "g1.tasc.split8"), host_mask_state(m), pr);
  check_tile_metadata(m8);
  EXPECT_EQ(m8.n_partials, 7);
}

TEST(LaunchPrepCpu, TraversalOrders) {
  DenseBlockMask m(1, 1, 1, 12);
  for (int c : {0, 2, 3, 5, 6, 7, 10}) m.at(0, 0, 0, c) = 1;  // runs: [0] [2 3] [5 6 7] [10]
  const PrepProblem pr{1, 1, 1, 16, 192, 64};
  const auto ms = host_mask_state(m);
  EXPECT_EQ(prepare_plan_cpu(plan_of("q16d", "kv16d", "g1.tdesc.split1"), ms, pr).kv_tile,
            (std::vector<std::int32_t>{10, 7, 6, 5, 3, 2, 0}));
  EXPECT_EQ(prepare_plan_cpu(plan_of("q16d", "kv16d", "g1.trun.split1"), ms, pr).kv_tile,
            (std::vector<std::int32_t>{5, 6, 7, 2, 3, 0, 10}));
  // Packed p2 of {0 1 4 5 6 9}: entries {0,1} {4,5} {6,9}: runs [{0,1}] [{4,5},{6,9}]
  DenseBlockMask m2(1, 1, 1, 12);
  for (int c : {0, 1, 4, 5, 6, 9}) m2.at(0, 0, 0, c) = 1;
  const auto pk = prepare_plan_cpu(plan_of("q16d", "kv16p2", "g1.trun.split1"), host_mask_state(m2), pr);
  check_tile_metadata(pk);
  EXPECT_EQ(pk.gather_blocks, (std::vector<std::int32_t>{4, 5, 6, 9, 0, 1}));
  EXPECT_EQ(pk.member, (std::vector<std::uint64_t>{3, 3, 3}));
}

TEST(LaunchPrepCpu, PersistentOrderIsLongestFirstAndStable) {
  DenseBlockMask m(1, 1, 4, 8);
  for (int c = 0; c < 2; ++c) m.at(0, 0, 0, c) = 1;
  for (int c = 0; c < 5; ++c) m.at(0, 0, 1, c) = 1;
  for (int c = 0; c < 2; ++c) m.at(0, 0, 3, c) = 1;
  const PrepProblem pr{1, 1, 1, 64, 128, 64};
  const auto md = prepare_plan_cpu(plan_of("q16d", "kv16d", "g2p.tasc.split1"), host_mask_state(m), pr);
  check_tile_metadata(md);
  ASSERT_EQ(md.items.size(), 4u);
  EXPECT_EQ(md.items[0].q_start, 16);
  EXPECT_EQ(md.items[1].q_start, 0);
  EXPECT_EQ(md.items[2].q_start, 48);
  EXPECT_EQ(md.items[3].q_start, 32);
  EXPECT_EQ(md.view().items_per_cta, 2);
  EXPECT_EQ(md.view().persistent, 1);
}

TEST(LaunchPrepCpu, BroadcastAndGqaWorkItems) {
  DenseBlockMask m(1, 1, 2, 2);  // broadcast over B = 2, H_q = 4
  m.at(0, 0, 0, 1) = 1;
  const PrepProblem pr{2, 4, 2, 32, 32, 64};
  const auto md = prepare_plan_cpu(plan_of("q16d", "kv16d"), host_mask_state(m), pr);
  check_tile_metadata(md);
  EXPECT_EQ(md.items.size(), 16u);
  for (const WorkItem& w : md.items) EXPECT_EQ(w.tile_row, w.q_start / 16);
}

// Implicit work items (what the kernels compute for an unsplit plan, core/query_tiles.hpp) equal the items the
// CPU twin writes, for every Q mapping, broadcast / GQA extents and ragged token counts.
TEST(LaunchPrepCpu, ImplicitUnsplitItemsEqualTheBuiltItems) {
  std::mt19937_64 g(0x1a7e);
  int checked = 0;
  for (int iter = 0; iter < 60; ++iter) {
    const std::int64_t batch = 1 + static_cast<std::int64_t>(g() % 2), hkv = 1 + static_cast<std::int64_t>(g() % 2);
    const std::int64_t hq = hkv * (1 + static_cast<std::int64_t>(g() % 3));
    const std::int64_t nq = 1 + static_cast<std::int64_t>(g() % 700), nkv = 1 + static_cast<std::int64_t>(g() % 700);
    const PrepProblem pr{batch, hq, hkv, nq, nkv, 64};
    const std::int64_t bm = g() % 2 ? batch : 1, hm = g() % 2 ? hq : 1;
    const auto m = plan_testing::random_mask(bm, hm, num_blocks(nq, 64), num_blocks(nkv, 64), 0.3, g());
    for (const char* q : {"q64d", "q64c2", "q64c4", "q64r2", "q64r4"})
      for (const char* kv : {"kv64d", "kv64c2", "kv64p2", "kv64r2"}) {
        const Plan plan = plan_of(q, kv, iter % 2 ? "g1.tasc.split1" : "g1.tdesc.split1");
        const auto md = prepare_plan_cpu(plan, host_mask_state(m), pr);
        const QueryTileGeometry geo = md.params.query_geometry();
        ASSERT_EQ(static_cast<std::int64_t>(md.items.size()), md.params.q_tiles());
        for (std::size_t i = 0; i < md.items.size(); ++i) {
          const WorkItem a = unsplit_item(geo, md.tile_row_offsets.data(), nullptr, static_cast<std::int64_t>(i));
          const WorkItem& b = md.items[i];
          ASSERT_TRUE(a.batch == b.batch && a.head == b.head && a.q_start == b.q_start && a.q_len == b.q_len &&
                      a.entry_begin == b.entry_begin && a.entry_end == b.entry_end && a.tile_row == b.tile_row &&
                      a.partial == b.partial)
              << plan_id(plan) << " item " << i;
          ++checked;
        }
      }
  }
  EXPECT_GT(checked, 10000);
}

// Device membership words are c_q bytes (prep::member_bytes): every bit the rules write (qi * 8 + kj, qi < c_q) fits,
// so narrowing the CPU twins' 8-byte words to that width loses nothing; plans without membership have no array.
TEST(LaunchPrepCpu, MemberBytesIsTheCoarsenedQueryFactorAndHoldsEveryBit) {
  struct Case {
    const char* q;
    const char* kv;
    int bytes;
  };
  const Case cases[] = {{"q64d", "kv64d", 0},    {"q64r2", "kv64r2", 0},   {"q64d", "kv64c2", 1},
                        {"q64r2", "kv64p4", 1},  {"q64c2", "kv64d", 2},    {"q64c2", "kv64c2", 2},
                        {"q64c4", "kv64p2", 4},  {"q64c4", "kv64c4", 4},   {"q16c8", "kv16c8", 8},
                        {"q16c8", "kv16p8", 8}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.q) + "." + c.kv);
    const Plan plan = plan_of(c.q, c.kv);
    const PrepProblem pr{1, 2, 1, 700, 900, 64};
    const auto ms = host_mask_state(plan_testing::random_mask(1, 2, num_blocks(pr.n_q, plan.block_q),
                                                              num_blocks(pr.n_kv, plan.block_kv), 0.4, 17));
    const auto md = prepare_plan_cpu(plan, ms, pr);
    ASSERT_EQ(prep::member_bytes(md.params), c.bytes);
    ASSERT_EQ(md.member.empty(), c.bytes == 0);
    const std::uint64_t fits = c.bytes == 8 ? ~0ull : (1ull << (8 * c.bytes)) - 1;
    std::uint64_t seen = 0;
    for (const std::uint64_t w : md.member) {
      EXPECT_EQ(w & ~fits, 0u);
      seen |= w;
    }
    if (c.bytes > 1) {
      EXPECT_NE(seen >> (8 * (c.bytes - 1)), 0u);  // the last byte is used: no narrower width fits
    }
  }
}

TEST(LaunchPrepCpu, BoundsCoverActualSizes) {
  auto m = plan_testing::random_mask(2, 3, 9, 11, 0.4, 7);
  const PrepProblem pr{2, 3, 3, 9 * 32 - 5, 11 * 32 - 3, 64};
  for (const char* q : {"q32d", "q32c2", "q32r2"})
    for (const char* kv : {"kv32d", "kv32c4", "kv32p4", "kv32r2"}) {
      const Plan p = plan_of(q, kv, "g1.tasc.split4");
      const auto ms = host_mask_state(m);
      const auto md = prepare_plan_cpu(p, ms, pr);
      check_tile_metadata(md);
      const auto b = prep_bounds(p, md.params, static_cast<std::int64_t>(ms.col_indices.size()), 64);
      EXPECT_EQ(b.tile_rows + 1, static_cast<std::int64_t>(md.tile_row_offsets.size()));
      EXPECT_LE(md.n_entries(), b.entries);
      EXPECT_LE(static_cast<std::int64_t>(md.items.size()), b.items);
      EXPECT_LE(md.n_partials, b.partials);
      EXPECT_LE(static_cast<std::int64_t>(md.merge_targets.size()), b.merges);
    }
}

TEST(LaunchPrepCpu, RejectsMismatchedMaskExtents) {
  const auto ms = host_mask_state(small_mask());
  PrepProblem pr = kSmall;
  pr.n_q = 100;
  try {
    prepare_plan_cpu(plan_of("q16d", "kv16d"), ms, pr);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "mask.n_qb");
  }
  pr = kSmall;
  pr.heads_q = 3;
  pr.heads_kv = 2;
  EXPECT_THROW(prepare_plan_cpu(plan_of("q16d", "kv16d"), ms, pr), Error);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// The GPU builder's warp-parallel form: a row's kv-unit space split over L lanes (build_tile_row_range), counted,
// scanned and filled, reproduces the sequential rule (build_tile_row) exactly. Emulated here lane by lane.
TEST(LaunchPrepCpu, LaneSplitRowBuildEqualsSequentialRule) {
  std::mt19937_64 g(42);
  int rows_checked = 0;
  for (int iter = 0; iter < 150; ++iter) {
    const char* qmaps[] = {"q16d", "q16c2", "q16c4", "q16c8", "q32r2"};
    const char* kvmaps[] = {"kv16d", "kv16c2", "kv16c4", "kv16c8", "kv16p2", "kv16p4", "kv16p8", "kv32r2", "kv64r4"};
    const Plan plan = plan_of(qmaps[g() % 5], kvmaps[g() % 9]);
    const PrepProblem pr{1, 2, 2, 1 + static_cast<std::int64_t>(g() % 300), 1 + static_cast<std::int64_t>(g() % 2000), 64};
    const double dens[] = {0.0, 0.03, 0.2, 0.7, 1.0};
    const auto dm = plan_testing::random_mask(1, 2, num_blocks(pr.n_q, plan.block_q), num_blocks(pr.n_kv, plan.block_kv),
                                              dens[g() % 5], g());
    const HostMaskState ms = host_mask_state(dm);
    const prep::PrepParams p = make_prep_params(plan, ms.shape, pr);
    const int lanes = iter % 3 == 0 ? 7 : 32;
    for (std::int64_t r = 0; r < p.tile_rows(); ++r) {
      const std::int32_t n = prep::build_tile_row(p, ms.row_offsets.data(), ms.col_indices.data(), r, nullptr, nullptr, nullptr);
      std::vector<std::int32_t> kv_a(n), g_a(static_cast<std::size_t>(n) * std::max(p.pack, 1));
      std::vector<std::uint64_t> m_a(n);
      prep::build_tile_row(p, ms.row_offsets.data(), ms.col_indices.data(), r, kv_a.data(), m_a.data(), g_a.data());
      // Lane pass 1: counts; exclusive scans; the row total.
      const std::int64_t units = prep::row_units(p);
      std::vector<prep::RangeCount> rc(lanes);
      std::int32_t tot_units = 0, tot_entries = 0;
      for (int l = 0; l < lanes; ++l) {
        rc[l] = prep::build_tile_row_range(p, ms.row_offsets.data(), ms.col_indices.data(), r,
                                           static_cast<std::int32_t>(units * l / lanes),
                                           static_cast<std::int32_t>(units * (l + 1) / lanes), 0, 0, nullptr, nullptr,
                                           nullptr);
        tot_units += rc[l].units;
        tot_entries += rc[l].entries;
      }
      const std::int32_t n_b = p.pack ? (tot_units + p.pack - 1) / p.pack : tot_entries;
      ASSERT_EQ(n_b, n) << plan_id(plan) << " row " << r;
      std::vector<std::int32_t> kv_b(n, 0), g_b(static_cast<std::size_t>(n) * std::max(p.pack, 1), -1);
      std::vector<std::uint64_t> m_b(n, 0);
      std::int32_t ub = 0, eb = 0;
      for (int l = 0; l < lanes; ++l) {
        prep::build_tile_row_range(p, ms.row_offsets.data(), ms.col_indices.data(), r,
                                   static_cast<std::int32_t>(units * l / lanes),
                                   static_cast<std::int32_t>(units * (l + 1) / lanes), ub, eb, kv_b.data(), m_b.data(),
                                   g_b.data());
        ub += rc[l].units;
        eb += rc[l].entries;
      }
      if (!p.pack) {
        ASSERT_EQ(kv_b, kv_a) << plan_id(plan) << " row " << r;
      }
      if (p.membership) {
        ASSERT_EQ(m_b, m_a) << plan_id(plan) << " row " << r;
      }
      if (p.pack) {
        ASSERT_EQ(g_b, g_a) << plan_id(plan) << " row " << r;
      }
      ++rows_checked;
    }
  }
  EXPECT_GT(rows_checked, 1000);
}

}  // namespace
}  // namespace tessera
