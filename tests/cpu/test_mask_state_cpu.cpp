// build_mask_state_cpu() and derive_mask_stats(): canonical block-CSR and counters against brute force on the bits.
#include <gtest/gtest.h>

#include <random>

#include "expect_error.hpp"
#include "mask_corruptions.hpp"
#include "mask_gen.hpp"
#include "tessera/error.hpp"
#include "tessera/mask_state.hpp"

namespace tessera {
namespace {

using namespace tessera::testing;

/// Counters computed straight from the bit array (an independent implementation).
MaskCounters brute_counters(const MaskShape& s, const std::vector<std::uint8_t>& bits) {
  MaskCounters c;
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    std::int64_t n = 0;
    for (std::int64_t j = 0; j < s.n_kvb; ++j) {
      const bool a = bits[r * s.n_kvb + j];
      n += a;
      const bool start = a && (j == 0 || !bits[r * s.n_kvb + j - 1]);
      if (!start) continue;
      std::int64_t len = 0;
      while (j + len < s.n_kvb && bits[r * s.n_kvb + j + len]) ++len;
      ++c.runs;
      if (len >= 2) c.blocks_in_long_runs += len;
    }
    c.active_blocks += n;
    c.max_row_active = std::max(c.max_row_active, n);
    c.empty_rows += n == 0;
  }
  // Coarsened pairs: OR of the bits of each aligned group of query blocks within one (batch, head).
  for (int level = 0; level < 3; ++level) {
    const std::int64_t g = std::int64_t{2} << level;
    for (std::int64_t head = 0; head < s.batch * s.heads; ++head)
      for (std::int64_t q = 0; q < s.n_qb; q += g) {
        const std::int64_t n = std::min(g, s.n_qb - q);
        for (std::int64_t j = 0; j < s.n_kvb; ++j) {
          bool any = false;
          for (std::int64_t r = 0; r < n; ++r) any = any || bits[((head * s.n_qb) + q + r) * s.n_kvb + j];
          c.coarsened_pairs[level] += any ? n : 0;
        }
      }
  }
  return c;
}

TEST(MaskStateCpu, RandomMasksAllFormatsMatchBruteForce) {
  std::mt19937_64 g(20261129);
  const MaskPattern patterns[] = {MaskPattern::kRandom, MaskPattern::kEmpty, MaskPattern::kFull,
                                  MaskPattern::kSingle, MaskPattern::kRuns, MaskPattern::kRowDensity};
  int checked = 0;
  for (int it = 0; it < 300; ++it) {
    MaskShape s{1 + static_cast<std::int64_t>(g() % 3), 1 + static_cast<std::int64_t>(g() % 4),
                1 + static_cast<std::int64_t>(g() % 9), 1 + static_cast<std::int64_t>(g() % 70)};
    const MaskPattern p = patterns[it % 6];
    const double density = std::uniform_real_distribution<double>(0, 1)(g);
    const auto bits = random_mask_bits(s, p, density, g);
    const auto [off, col] = expected_csr(s, bits);
    const MaskCounters expected = brute_counters(s, bits);
    const DType dt = it % 2 ? DType::kBool : DType::kUInt8;
    HostMaskTensors enc[] = {encode_dense(s, bits, dt, &g, it % 5, it % 3, it % 4 == 0 ? 3 : 1),
                             encode_csr(s, bits), encode_index_lists(s, bits, it % 3, &g, 12345)};
    for (auto& e : enc) {
      const HostMaskState st = build_mask_state_cpu(e.mask);
      ASSERT_EQ(st.shape, s);
      ASSERT_EQ(st.row_offsets, off) << mask_format_name(e.mask.format);
      ASSERT_EQ(st.col_indices, col) << mask_format_name(e.mask.format);
      ASSERT_EQ(st.stats.counters, expected) << mask_format_name(e.mask.format);
      ASSERT_EQ(st.stats, derive_mask_stats(s, expected));
      ++checked;
    }
  }
  EXPECT_EQ(checked, 900);
}

TEST(MaskStats, DerivedRatios) {
  const MaskShape s{1, 2, 3, 10};  // 6 rows, 60 blocks
  MaskCounters c;
  c.active_blocks = 12;
  c.runs = 5;
  c.blocks_in_long_runs = 9;
  c.max_row_active = 4;
  c.empty_rows = 2;
  const MaskStats st = derive_mask_stats(s, c);
  EXPECT_DOUBLE_EQ(st.density, 12.0 / 60.0);
  EXPECT_DOUBLE_EQ(st.run_coverage, 9.0 / 12.0);
  EXPECT_DOUBLE_EQ(st.mean_run_length, 12.0 / 5.0);
  EXPECT_DOUBLE_EQ(st.mean_row_active, 2.0);
  EXPECT_DOUBLE_EQ(st.row_imbalance, 4.0 / 2.0);
  EXPECT_EQ(st.max_row_active, 4);
  EXPECT_EQ(st.empty_rows, 2);
  const MaskStats empty = derive_mask_stats(s, MaskCounters{0, 0, 0, 0, 6});
  EXPECT_EQ(empty.density, 0.0);
  EXPECT_EQ(empty.run_coverage, 0.0);
  EXPECT_EQ(empty.mean_run_length, 0.0);
  EXPECT_EQ(empty.row_imbalance, 0.0);
}

TEST(MaskStateCpu, KnownRowCounters) {
  // One row: 1 1 0 1 0 1 1 1 0 0 -> runs 3, in long runs 5, active 6.
  const MaskShape s{1, 1, 1, 10};
  const std::vector<std::uint8_t> bits = {1, 1, 0, 1, 0, 1, 1, 1, 0, 0};
  auto e = encode_index_lists(s, bits);
  const HostMaskState st = build_mask_state_cpu(e.mask);
  EXPECT_EQ(st.stats.counters, (MaskCounters{6, 3, 5, 6, 0, {6, 6, 6}}));  // one row: every group is that row
  EXPECT_DOUBLE_EQ(st.stats.run_coverage, 5.0 / 6.0);
  EXPECT_DOUBLE_EQ(st.stats.coarsen_cost[0], 1.0);
}

TEST(MaskStateCpu, KnownCoarsenedPairs) {
  // Rows of one head: {0,1} {1,2} {5} {} {7}. Groups of 2: {0,1,2} x 2 + {5} x 2 + {7} x 1 = 9; of 4:
  // {0,1,2,5} x 4 + {7} x 1 = 17; of 8: {0,1,2,5,7} x 5 = 25. Active 6.
  const MaskShape s{1, 1, 5, 8};
  std::vector<std::uint8_t> bits(40, 0);
  for (auto [r, j] : {std::pair{0, 0}, {0, 1}, {1, 1}, {1, 2}, {2, 5}, {4, 7}}) bits[std::size_t(r * 8 + j)] = 1;
  auto e = encode_index_lists(s, bits);
  const HostMaskState st = build_mask_state_cpu(e.mask);
  EXPECT_EQ(st.stats.counters.coarsened_pairs[0], 9);
  EXPECT_EQ(st.stats.counters.coarsened_pairs[1], 17);
  EXPECT_EQ(st.stats.counters.coarsened_pairs[2], 25);
  EXPECT_DOUBLE_EQ(st.stats.coarsen_cost[0], 9.0 / 6.0);
  EXPECT_DOUBLE_EQ(st.stats.coarsen_cost[1], 17.0 / 9.0);
  EXPECT_DOUBLE_EQ(st.stats.coarsen_cost[2], 25.0 / 17.0);
  // Groups never span two heads: two heads of one row each, disjoint blocks, cost 1 at every level.
  const MaskShape two{1, 2, 1, 4};
  const std::vector<std::uint8_t> b2 = {1, 0, 0, 0, 0, 1, 0, 0};
  const HostMaskState st2 = build_mask_state_cpu(encode_dense(two, b2).mask);
  EXPECT_EQ(st2.stats.counters.coarsened_pairs[0], 2);
  EXPECT_EQ(st2.stats.counters.coarsened_pairs[2], 2);
  EXPECT_DOUBLE_EQ(st2.stats.coarsen_cost[2], 1.0);
  EXPECT_EQ(derive_mask_stats(two, MaskCounters{}).coarsen_cost[0], 0.0);  // an empty mask: 0, not NaN
}

TEST(MaskStateCpu, InvalidContentsRejected) {
  const MaskShape s{1, 2, 2, 5};
  std::mt19937_64 g(3);
  const auto bits = random_mask_bits(s, MaskPattern::kFull, 1.0, g);
  {
    auto e = encode_csr(s, bits);
    e.i32(1)[6] = 5;  // row 1, first column, out of range
    try {
      build_mask_state_cpu(e.mask);
      FAIL() << "no error";
    } catch (const Error& err) {
      EXPECT_EQ(err.argument(), "mask.col_indices");
      EXPECT_NE(err.message().find("col_indices[6] = 5 in row 1 (b_m = 0, h_m = 0, qb = 1) is outside [0, n_kvb = 5)"),
                std::string::npos) << err.what();
    }
  }
  {
    auto e = encode_index_lists(s, bits, 0, &g);
    e.i32(1)[3 * 5 + 4] = e.i32(1)[3 * 5 + 0];
    try {
      build_mask_state_cpu(e.mask);
      FAIL() << "no error";
    } catch (const Error& err) {
      EXPECT_EQ(err.argument(), "mask.indices");
      EXPECT_NE(err.message().find("indices[4] = "), std::string::npos) << err.what();
      EXPECT_NE(err.message().find("of row 3 (b_m = 0, h_m = 1, qb = 1) duplicates indices[0]"), std::string::npos)
          << err.what();
    }
  }
  {
    auto e = encode_dense(s, bits);
    e.mask.dense.device = Device::kCuda;
    EXPECT_THROW(build_mask_state_cpu(e.mask), Error);
  }
}

// Index lists declare n_kvb (the arrays are [rows, K_max]): an n_kvb near 2^31 once made the duplicate check
// allocate 8 * n_kvb bytes (found by tests/fuzz: regressions/mask_state/index_lists_huge_n_kvb). Rows are then sorted
// instead; the errors, and which one comes first, are those of the small-n_kvb path.
TEST(MaskStateCpu, IndexListsWithHugeNkvbCheckWithoutATableOfNkvbSlots) {
  for (const std::int64_t n_kvb : {std::int64_t(64), std::int64_t(0x7fffffff)}) {
    const auto check = [&](std::vector<std::int32_t> counts, std::vector<std::int32_t> indices, const char* argument,
                           const std::string& fragment) {
      const std::int64_t k_max = std::int64_t(indices.size() / counts.size());
      const TensorView c = make_tensor(counts.data(), DType::kInt32, Device::kCpu, {1, 1, std::int64_t(counts.size())});
      const TensorView i =
          make_tensor(indices.data(), DType::kInt32, Device::kCpu, {1, 1, std::int64_t(counts.size()), k_max});
      const BlockMask m = BlockMask::from_index_lists(c, i, n_kvb);
      if (!argument) {
        const HostMaskState st = build_mask_state_cpu(m);
        EXPECT_EQ(st.col_indices, (std::vector<std::int32_t>{3, 5, 9, 1, 2, 7})) << n_kvb;
        // Two disjoint rows of one head: their union (6 blocks) for both rows at every level, counted without a
        // table of n_kvb slots (the fuzz regression index_lists_huge_n_kvb: 2^31 - 1 columns).
        EXPECT_EQ(st.stats.counters.coarsened_pairs[0], 12) << n_kvb;
        EXPECT_EQ(st.stats.counters.coarsened_pairs[2], 12) << n_kvb;
        return;
      }
      expect_error([&] { build_mask_state_cpu(m); }, ErrorCode::kInvalidArgument, argument, fragment,
                   "n_kvb " + std::to_string(n_kvb));
    };
    check({3, 3}, {9, 3, 5, 2, 7, 1}, nullptr, "");
    const std::string row1 = " of row 1 (b_m = 0, h_m = 0, qb = 1) ";
    check({3, 3}, {9, 3, 5, 2, 7, 2}, "mask.indices", "indices[2] = 2" + row1 + "duplicates indices[0]");
    // The first error in row order wins: a repeat before an out-of-range entry, and the other way round.
    check({2, 3}, {1, 2, 0, 4, 4, 64}, "mask.indices", "indices[1] = 4" + row1 + "duplicates indices[0]");
    check({2, 3}, {1, 2, 0, 4, -1, 4}, "mask.indices", "indices[1] = -1" + row1 + "is outside");
    check({1, 3}, {1, 9, 6, 6, 6, 9}, "mask.indices", "indices[1] = 6" + row1 + "duplicates indices[0]");
  }
}

TEST(MaskStateCpu, CorruptionsRaisePreciseErrors) {
  int n = 0;
  for (const MaskCorruption& c : mask_corruptions()) {
    HostMaskTensors h = corruption_base(c.format);
    EXPECT_NO_THROW(build_mask_state_cpu(h.mask)) << c.name;
    c.corrupt(h);
    try {
      build_mask_state_cpu(h.mask);
      ADD_FAILURE() << c.name << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << c.name;
      EXPECT_EQ(e.argument(), c.argument) << c.name << ": " << e.what();
      EXPECT_NE(e.message().find(c.fragment), std::string::npos) << c.name << ": " << e.what();
    }
    ++n;
  }
  EXPECT_GE(n, 15);
}

}  // namespace
}  // namespace tessera
