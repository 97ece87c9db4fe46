// Statistics of the real STA table (FastVideo, HunyuanVideo 768p) against mask_corpus.md section 4.1, and the
// real STA family's cases.
#include <gtest/gtest.h>

#include <map>

#include "tessera_corpus/family.hpp"
#include "tessera_corpus/sta.hpp"

using namespace tessera::corpus;

namespace {
const StaTable* table() {
  static const std::string path = default_sta_table_path();
  static const StaTable* t = path.empty() ? nullptr : new StaTable(load_sta_table(path));
  return t;
}
}  // namespace

TEST(CorpusStaReal, MatchesSection41) {
  const StaTable* t = table();
  if (!t) GTEST_SKIP() << "STA table not found (set TESSERA_STA_TABLE)";
  ASSERT_EQ(t->windows.size(), 72000u);
  // Densities from real masks (one mask per distinct window, rows checked exactly).
  std::map<std::tuple<int, int, int>, double> density;
  for (const auto& w : t->windows) {
    const auto key = std::make_tuple(w.t, w.h, w.w);
    if (density.count(key)) continue;
    PackedMask m(1, 300, 300);
    sta_fill_head(m, 0, kStaHunyuanTiles, w);
    density[key] = double(m.count()) / 90000.0;
  }
  double sparse_sum = 0, all_sum = 0;
  std::map<std::tuple<int, int, int>, int> mix;
  int sparse_n = 0;
  for (int s = 0; s < 50; ++s)
    for (int l = 0; l < 60; ++l)
      for (int h = 0; h < 24; ++h) {
        const StaWindow& w = t->at(s, l, h);
        const double d = density[std::make_tuple(w.t, w.h, w.w)];
        all_sum += d;
        if (s < 15) {
          ASSERT_EQ(w, (StaWindow{5, 6, 10})) << "steps 0-14 are dense";
        } else {
          sparse_sum += d;
          ++sparse_n;
          ++mix[std::make_tuple(w.t, w.h, w.w)];
        }
      }
  EXPECT_NEAR(sparse_sum / sparse_n, 0.166, 0.0006);
  EXPECT_NEAR(all_sum / 72000.0, 0.416, 0.0006);
  const double n = sparse_n;
  EXPECT_NEAR(mix[std::make_tuple(5, 3, 3)] / n, 0.404, 0.0006);
  EXPECT_NEAR(mix[std::make_tuple(1, 6, 10)] / n, 0.316, 0.0006);
  EXPECT_NEAR(mix[std::make_tuple(3, 3, 5)] / n, 0.147, 0.0006);
  EXPECT_NEAR(mix[std::make_tuple(5, 1, 10)] / n, 0.104, 0.0006);
  EXPECT_NEAR(mix[std::make_tuple(5, 6, 1)] / n, 0.029, 0.0006);
  int never = 0;
  for (int l = 0; l < 60; ++l)
    for (int h = 0; h < 24; ++h) {
      bool same = true;
      for (int s = 16; s < 50; ++s) same = same && t->at(s, l, h) == t->at(15, l, h);
      never += same;
    }
  EXPECT_EQ(never, 827);  // 57 % of (layer, head) never change over the 35 sparse steps
}

TEST(CorpusStaReal, FamilyCasesAreTheTableAndReexpressExactly) {
  if (!table()) GTEST_SKIP() << "STA table not found (set TESSERA_STA_TABLE)";
  CorpusOptions opt;
  opt.small = true;
  const int n = case_count("STA-real", opt);
  std::map<std::pair<int, int>, PackedMask> native;
  for (int i = 0; i < n; ++i) {
    const Case c = make_case("STA-real", i, opt);
    ASSERT_EQ(c.meta.kind, "real");
    if (c.meta.block_q == 384) {
      for (int h = 0; h < 24; ++h) {
        const StaWindow& w = table()->at(c.meta.step, c.meta.layer, h);
        for (int q = 0; q < 300; ++q) ASSERT_EQ(c.mask.row_count(h, q), w.t * w.h * w.w);
      }
      native[{c.meta.step, c.meta.layer}] = c.mask;
    }
  }
  for (int i = 0; i < n; ++i) {
    const Case c = make_case("STA-real", i, opt);
    if (c.meta.block_q == 384) continue;
    const int f = 384 / c.meta.block_q;
    PackedMask coarse(24, 300, 300);
    for (int h = 0; h < 24; ++h) sta_fill_head(coarse, h, kStaHunyuanTiles, table()->at(c.meta.step, c.meta.layer, h));
    // A 384-block is active <=> all of its sub-blocks are active (and inactive <=> none is).
    for (int h = 0; h < 24; h += 5)
      for (int q = 0; q < 300; ++q)
        for (int k = 0; k < 300; ++k) {
          int on = 0;
          for (int a = 0; a < f; ++a)
            for (int b = 0; b < f; ++b) on += c.mask.get(h, q * f + a, k * f + b);
          ASSERT_EQ(on, coarse.get(h, q, k) ? f * f : 0);
        }
  }
}
