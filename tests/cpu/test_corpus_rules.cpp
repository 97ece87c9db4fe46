// Rule-exact generators (STA, Radial, SVG bands) against small hand-computed masks.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "tessera/error.hpp"
#include "tessera_corpus/radial.hpp"
#include "tessera_corpus/sta.hpp"
#include "tessera_corpus/svg.hpp"

using namespace tessera::corpus;

namespace {
std::set<int> row_set(const PackedMask& m, int h, int q) {
  std::set<int> s;
  for (int k = 0; k < m.n_kvb; ++k)
    if (m.get(h, q, k)) s.insert(k);
  return s;
}
}  // namespace

TEST(CorpusSta, WindowShiftsAtEdges1d) {
  // Grid 1x1x5, window (1,1,3): start = clamp(c - 1, 0, 2).
  PackedMask m(1, 5, 5);
  sta_fill_head(m, 0, {1, 1, 5}, {1, 1, 3});
  EXPECT_EQ(row_set(m, 0, 0), (std::set<int>{0, 1, 2}));
  EXPECT_EQ(row_set(m, 0, 1), (std::set<int>{0, 1, 2}));
  EXPECT_EQ(row_set(m, 0, 2), (std::set<int>{1, 2, 3}));
  EXPECT_EQ(row_set(m, 0, 3), (std::set<int>{2, 3, 4}));
  EXPECT_EQ(row_set(m, 0, 4), (std::set<int>{2, 3, 4}));
}

TEST(CorpusSta, WindowEvenSizes2d) {
  // Grid 1x3x4, window (1,2,2): h starts 0,0,1; w starts 0,0,1,2.
  PackedMask m(2, 12, 12);
  sta_fill_head(m, 1, {1, 3, 4}, {1, 2, 2});
  EXPECT_EQ(row_set(m, 1, 2 * 4 + 3), (std::set<int>{6, 7, 10, 11}));  // (h=2, w=3)
  EXPECT_EQ(row_set(m, 1, 0), (std::set<int>{0, 1, 4, 5}));             // (0, 0)
  EXPECT_EQ(row_set(m, 1, 1 * 4 + 2), (std::set<int>{1, 2, 5, 6}));      // (1, 2)
  EXPECT_EQ(m.count(), 12 * 4);                                          // head 1 only, 4 per row
  EXPECT_TRUE(row_set(m, 0, 0).empty());
  EXPECT_THROW(sta_fill_head(m, 0, {1, 3, 4}, {1, 4, 2}), tessera::Error);
}

TEST(CorpusSta, ExactRowCountsOnHunyuanGrid) {
  for (const StaWindow w : {StaWindow{5, 3, 3}, StaWindow{1, 6, 10}, StaWindow{3, 3, 5}, StaWindow{5, 1, 10}, StaWindow{5, 6, 1}}) {
    PackedMask m(1, 300, 300);
    sta_fill_head(m, 0, kStaHunyuanTiles, w);
    for (int q = 0; q < 300; ++q) {
      ASSERT_EQ(m.row_count(0, q), w.t * w.h * w.w);
      ASSERT_TRUE(m.get(0, q, q)) << "own tile";
    }
  }
}

TEST(CorpusSta, RefineIsExact) {
  PackedMask m(1, 300, 300);
  sta_fill_head(m, 0, kStaHunyuanTiles, {3, 3, 5});
  for (int f : {3, 6}) {
    const PackedMask r = refine_blocks(m, f);
    ASSERT_EQ(r.n_qb, 300 * f);
    for (int i = 0; i < r.n_qb; i += 7)
      for (int j = 0; j < r.n_kvb; ++j) ASSERT_EQ(r.get(0, i, j), m.get(0, i / f, j / f)) << i << "," << j;
    EXPECT_EQ(r.count(), m.count() * f * f);
  }
}

TEST(CorpusRadial, HandComputedSplitDropsFramePairs) {
  // 4 frames x 32 tokens, B = 16: 2^bitlen(32) = 64. d = 0: 64 < 128 -> split 2, 0 % 2 == 0 kept, width = tpf
  // (dense). d = 1: 64 / 2 = 32 -> split 4, dropped; d = 2, 3: 16 -> split 8, dropped. Frame 0 is the sink.
  const PackedMask m = radial_mask(4, 32, 16, 1.0, true);
  ASSERT_EQ(m.n_qb, 8);
  for (int q = 0; q < 8; ++q)
    for (int k = 0; k < 8; ++k) {
      const bool want = k / 2 == 0 || q / 2 == k / 2;
      EXPECT_EQ(m.get(0, q, k), want) << q << "," << k;
    }
}

TEST(CorpusRadial, HandComputedBandBlocks) {
  // 3 frames x 128 tokens, B = 32 (4 blocks per frame), 2^bitlen(128) = 256. d = 1 (Wan): width 64, kept
  // (256 / 2 >= 128). d = 2: 256 / 4 = 64 -> split 2, 2 % 2 == 0 kept, width max(64 * 1.0, 32) = 64.
  // Width 64 in a frame pair: block offset |a-b| <= 1 fully active; |a-b| = 2: column y has 96 - y active rows,
  // > 32/3 for 22 of 32 columns (68.75 % > 60 %) -> active; |a-b| = 3: no active cell -> inactive.
  const PackedMask m = radial_mask(3, 128, 32, 1.0, true);
  ASSERT_EQ(m.n_qb, 12);
  for (int q = 0; q < 12; ++q)
    for (int k = 0; k < 12; ++k) {
      const int fi = q / 4, fj = k / 4, a = q % 4, b = k % 4;
      const bool want = fj == 0 || fi == fj || std::abs(a - b) <= 2;
      EXPECT_EQ(m.get(0, q, k), want) << q << "," << k;
    }
}

TEST(CorpusRadial, RaggedTailIsDense) {
  const PackedMask m = radial_mask(3, 40, 16, 1.0, true);  // 120 tokens -> 8 blocks, last one ragged
  ASSERT_EQ(m.n_qb, 8);
  for (int i = 0; i < 8; ++i) {
    EXPECT_TRUE(m.get(0, 7, i));
    EXPECT_TRUE(m.get(0, i, 7));
  }
  EXPECT_THROW(radial_mask(0, 40, 16, 1.0, true), tessera::Error);
}

TEST(CorpusSvg, BandWidthMatchesComputedExample) {
  // mask_corpus.md 2.3: Wan 720p d = 0.30 -> band +-12,416 tokens.
  EXPECT_EQ(svg_band_tokens(75600, 3600, 0.30, 0, false), 12416);
  EXPECT_THROW(svg_band_tokens(1000, 100, 0.0, 0, false), tessera::Error);
}

TEST(CorpusSvg, HandComputedBands) {
  // 64 tokens, B = 16: band 16 -> tridiagonal; band 17 reaches two blocks; strict 17 == non-strict 16.
  PackedMask a(1, 4, 4), b(1, 4, 4), c(1, 4, 4);
  svg_fill_head(a, 0, 64, 64, 16, 16, 16, false, 0);
  svg_fill_head(b, 0, 64, 64, 16, 16, 17, false, 0);
  svg_fill_head(c, 0, 64, 64, 16, 16, 17, true, 0);
  for (int q = 0; q < 4; ++q)
    for (int k = 0; k < 4; ++k) {
      EXPECT_EQ(a.get(0, q, k), std::abs(q - k) <= 1);
      EXPECT_EQ(b.get(0, q, k), std::abs(q - k) <= 2);
      EXPECT_EQ(c.get(0, q, k), std::abs(q - k) <= 1);
    }
  // Sink of 20 tokens turns kv blocks 0 and 1 on in every row; ragged 56 tokens; non-square 32 x 16.
  PackedMask d(1, 2, 4);
  svg_fill_head(d, 0, 56, 56, 32, 16, 0, false, 20);
  EXPECT_EQ(row_set(d, 0, 0), (std::set<int>{0, 1}));
  EXPECT_EQ(row_set(d, 0, 1), (std::set<int>{0, 1, 2, 3}));  // own tokens 32..55 -> kv blocks 2, 3
}
