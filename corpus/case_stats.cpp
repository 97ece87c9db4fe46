#include "tessera_corpus/case_stats.hpp"

#include <algorithm>
#include <bit>

namespace tessera::corpus {

const char* run_bucket_label(int b) noexcept {
  static const char* labels[kRunBuckets] = {"1", "2", "3-4", "5-8", "9-16", "17-32", "33-64", "65+"};
  return b >= 0 && b < kRunBuckets ? labels[b] : "?";
}

void CaseStats::add(const CaseStats& o) noexcept {
  min_row = rows ? std::min(min_row, o.min_row) : o.min_row;
  max_row = std::max(max_row, o.max_row);
  rows += o.rows;
  blocks += o.blocks;
  active += o.active;
  runs += o.runs;
  empty_rows += o.empty_rows;
  diag_rows += o.diag_rows;
  for (int i = 0; i < kRunBuckets; ++i) run_hist[std::size_t(i)] += o.run_hist[std::size_t(i)];
}

CaseStats case_stats(const PackedMask& m, int block_q, int block_kv) {
  CaseStats s;
  s.rows = m.heads * m.n_qb;
  s.blocks = s.rows * m.n_kvb;
  s.min_row = m.n_kvb;
  for (std::int64_t h = 0; h < m.heads; ++h)
    for (std::int64_t q = 0; q < m.n_qb; ++q) {
      const std::uint8_t* r = m.row(h, q);
      std::int64_t cnt = 0;
      for (std::int64_t i = 0; i < m.row_bytes; ++i) cnt += std::popcount(unsigned(r[i]));
      s.active += cnt;
      s.min_row = std::min(s.min_row, cnt);
      s.max_row = std::max(s.max_row, cnt);
      if (cnt == 0) {
        ++s.empty_rows;
        continue;
      }
      const std::int64_t diag = std::min(m.n_kvb - 1, q * block_q / block_kv);
      if (m.get(h, q, diag)) ++s.diag_rows;
      std::int64_t len = 0;
      for (std::int64_t k = 0; k <= m.n_kvb; ++k) {
        const bool on = k < m.n_kvb && ((r[k >> 3] >> (7 - (k & 7))) & 1u);
        if (on) {
          ++len;
        } else if (len) {
          ++s.runs;
          const int b = std::min(kRunBuckets - 1, int(std::bit_width(std::uint64_t(len - 1))));
          ++s.run_hist[std::size_t(b)];
          len = 0;
        }
      }
    }
  if (s.rows == 0) s.min_row = 0;
  return s;
}

}  // namespace tessera::corpus
