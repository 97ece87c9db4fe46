// The row-aligned tile-row layout on the host (core/launch_prep_row_aligned.cpp): spreading compact metadata into
// the layout the GPU builders write, compacting it back (what download_tile_metadata does), and the errors for
// layouts that break the rules.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "core/launch_prep.hpp"
#include "plan_test_util.hpp"
#include "tessera/error.hpp"

namespace tessera {
namespace {

using plan_testing::host_mask_state;
using plan_testing::random_mask;

Plan plan_of(const std::string& mappings, const std::string& org = "g1.tasc.split1") {
  return parse_plan_id("sm90a.mma.bf16.d64." + mappings + "." + org + ".s2.w4");
}

const char* const kMappings[] = {"q16d.kv16c2", "q16d.kv16c4", "q16d.kv16c8", "q16d.kv16p2", "q16d.kv16p4",
                                 "q32d.kv32r2", "q64d.kv64r4", "q32r2.kv32r2", "q16c2.kv16d", "q16c2.kv16c2",
                                 "q16c4.kv16p2", "q16c8.kv16c4", "q32c2.kv32r2", "q32r2.kv16c2"};
const char* const kOrgs[] = {"g1.tasc.split1", "g1.tdesc.split1", "g1.tasc.split4", "g1p.tdesc.split8",
                             "g2.tasc.split2"};

// Random masks over every mapping with membership, packing, refinement and splits: spread then compact gives the CPU
// twin's metadata back exactly, and the spread layout puts each row at r_kv times mu(M)'s offset of its first
// logical row, gaps filled, items inside their rows.
TEST(LaunchPrepRowAligned, SpreadThenCompactIsTheIdentity) {
  std::mt19937_64 g(0xa11e9);
  int spread_with_gaps = 0;
  for (int iter = 0; iter < 300; ++iter) {
    const Plan plan = plan_of(kMappings[iter % std::size(kMappings)], kOrgs[(iter / 3) % std::size(kOrgs)]);
    const PrepProblem pr{1 + static_cast<std::int64_t>(g() % 2), 2, 2, 1 + static_cast<std::int64_t>(g() % 300),
                         1 + static_cast<std::int64_t>(g() % 400), 64};
    const std::int64_t bm = g() % 2 ? pr.batch : 1, hm = g() % 2 ? pr.heads_q : 1;
    const double density = std::array{0.0, 0.05, 0.3, 1.0}[g() % 4];
    const auto ms = host_mask_state(random_mask(bm, hm, (pr.n_q + plan.block_q - 1) / plan.block_q,
                                                (pr.n_kv + plan.block_kv - 1) / plan.block_kv, density, g()));
    SCOPED_TRACE("iter " + std::to_string(iter) + " " + plan_id(plan));
    const HostTileMetadata cpu = prepare_plan_cpu(plan, ms, pr);
    HostTileMetadata md = cpu;
    const std::vector<std::int32_t> ends = spread_row_aligned(md, ms.row_offsets, -7);
    const prep::PrepParams& p = md.params;
    ASSERT_EQ(md.tile_row_offsets.back(), ms.row_offsets.back() * p.r_kv);
    for (std::int64_t t = 0; t < p.tile_rows(); ++t) {
      const std::int64_t lr = t / p.rows_per_head * p.n_qb + t % p.rows_per_head * p.c_q;
      ASSERT_EQ(md.tile_row_offsets[t], ms.row_offsets[lr] * p.r_kv) << "row " << t;
      ASSERT_LE(ends[t], md.tile_row_offsets[t + 1]) << "row " << t;
      ASSERT_EQ(ends[t] - md.tile_row_offsets[t], cpu.tile_row_offsets[t + 1] - cpu.tile_row_offsets[t]);
    }
    if (md.tile_row_offsets.back() > cpu.tile_row_offsets.back()) {
      ++spread_with_gaps;
      const auto& arr = p.pack ? md.gather_blocks : md.kv_tile;
      EXPECT_NE(std::count(arr.begin(), arr.end(), -7), 0);  // the gaps hold the fill value
    }
    for (const WorkItem& w : md.items) {
      ASSERT_GE(w.entry_begin, md.tile_row_offsets[w.tile_row]);
      ASSERT_LE(w.entry_end, ends[w.tile_row]);
    }
    compact_row_aligned(md, ends);
    ASSERT_TRUE(md == cpu);
    check_tile_metadata(md);
  }
  EXPECT_GT(spread_with_gaps, 100);  // most cases have gaps (coarsening, packing, refinement tails, empty rows)
}

HostTileMetadata spread_example(std::vector<std::int32_t>& ends) {
  const auto ms = host_mask_state(random_mask(1, 2, 5, 9, 0.5, 42));
  HostTileMetadata md = prepare_plan_cpu(plan_of("q16d.kv16c2", "g1.tasc.split2"), ms, PrepProblem{1, 2, 2, 80, 144, 64});
  ends = spread_row_aligned(md, ms.row_offsets, 0);
  return md;
}

void expect_internal(HostTileMetadata md, const std::vector<std::int32_t>& ends, const std::string& arg) {
  try {
    compact_row_aligned(md, ends);
    ADD_FAILURE() << "no error for " << arg;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
    EXPECT_NE(std::string(e.what()).find(arg), std::string::npos) << e.what();
  }
}

TEST(LaunchPrepRowAligned, CompactRejectsRowsOutsideTheirSpans) {
  std::vector<std::int32_t> ends;
  const HostTileMetadata md = spread_example(ends);
  ASSERT_GE(ends.size(), 2u);
  auto past = ends;
  past[0] = md.tile_row_offsets[1] + 1;  // runs into the next row's span
  expect_internal(md, past, "metadata.tile_row_ends");
  auto before = ends;
  before[1] = md.tile_row_offsets[1] - 1;  // ends before it starts
  expect_internal(md, before, "metadata.tile_row_ends");
  expect_internal(md, std::vector<std::int32_t>(ends.begin(), ends.end() - 1), "metadata.tile_row_ends");
  HostTileMetadata short_arrays = md;
  short_arrays.kv_tile.pop_back();
  expect_internal(short_arrays, ends, "metadata.tile_row_ends");
}

TEST(LaunchPrepRowAligned, CompactRejectsItemsOutsideTheirRows) {
  std::vector<std::int32_t> ends;
  const HostTileMetadata md = spread_example(ends);
  ASSERT_FALSE(md.items.empty());
  HostTileMetadata bad_row = md;
  bad_row.items[0].tile_row = static_cast<std::int32_t>(ends.size());
  expect_internal(bad_row, ends, "metadata.items");
  HostTileMetadata bad_range = md;
  bad_range.items[0].entry_end = ends[bad_range.items[0].tile_row] + 1;
  expect_internal(bad_range, ends, "metadata.items");
  if (!md.merge_targets.empty()) {
    HostTileMetadata bad_merge = md;
    bad_merge.merge_targets[0].entry_begin = md.tile_row_offsets[bad_merge.merge_targets[0].tile_row] - 1;
    expect_internal(bad_merge, ends, "metadata.merge_targets");
  }
}

}  // namespace
}  // namespace tessera
