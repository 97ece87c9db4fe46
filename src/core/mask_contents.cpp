// Content checks of a mask in host memory (CSR offsets and columns, index-list counts and indices).
// The GPU path replays this function on a host copy after its device checks flag an error, so the order of the
// checks here defines "the first error" for both paths.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "core/mask_checks.hpp"

namespace tessera::detail {

namespace {

[[noreturn]] void fail(const char* argument, const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, argument, message);
}

std::string row_name(const BlockMask& m, std::int64_t row) {
  const std::int64_t qb = row % m.n_qb;
  const std::int64_t h = (row / m.n_qb) % m.heads;
  const std::int64_t b = row / (m.n_qb * m.heads);
  return fmt::format("row {} (b_m = {}, h_m = {}, qb = {})", row, b, h, qb);
}

void check_csr(const BlockMask& m) {
  const auto* off = static_cast<const std::int32_t*>(m.row_offsets.data);
  const auto* col = static_cast<const std::int32_t*>(m.col_indices.data);
  const std::int64_t rows = m.rows();
  const std::int64_t nnz = m.col_indices.shape[0];
  if (off[0] != 0) fail("mask.row_offsets", fmt::format("row_offsets[0] = {}, expected 0", off[0]));
  for (std::int64_t r = 0; r < rows; ++r) {
    if (off[r + 1] < off[r]) {
      fail("mask.row_offsets", fmt::format("row_offsets[{}] = {} is less than row_offsets[{}] = {} "
                                           "(offsets must be non-decreasing)", r + 1, off[r + 1], r, off[r]));
    }
  }
  if (off[rows] != nnz) {
    fail("mask.row_offsets", fmt::format("row_offsets[{}] = {} does not equal nnz = {} (the length of col_indices)",
                                         rows, off[rows], nnz));
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t p = off[r]; p < off[r + 1]; ++p) {
      if (col[p] < 0 || col[p] >= m.n_kvb) {
        fail("mask.col_indices", fmt::format("col_indices[{}] = {} in {} is outside [0, n_kvb = {})", p, col[p],
                                             row_name(m, r), m.n_kvb));
      }
      if (p > off[r] && col[p] <= col[p - 1]) {
        fail("mask.col_indices", fmt::format("col_indices[{}] = {} in {} is not greater than col_indices[{}] = {} "
                                             "(columns must be strictly increasing within a row)",
                                             p, col[p], row_name(m, r), p - 1, col[p - 1]));
      }
    }
  }
}

void check_index_lists(const BlockMask& m) {
  const auto* cnt = static_cast<const std::int32_t*>(m.counts.data);
  const auto* idx = static_cast<const std::int32_t*>(m.indices.data);
  const std::int64_t rows = m.rows();
  const std::int64_t k_max = mask_k_max(m);
  for (std::int64_t r = 0; r < rows; ++r) {
    if (cnt[r] < 0 || cnt[r] > k_max) {
      fail("mask.counts", fmt::format("counts of {} = {} is outside [0, K_max = {}]", row_name(m, r), cnt[r], k_max));
    }
  }
  const auto out_of_range = [&](std::int64_t r, std::int64_t j, std::int32_t v) {
    fail("mask.indices", fmt::format("indices[{}] = {} of {} is outside [0, n_kvb = {})", j, v, row_name(m, r),
                                     m.n_kvb));
  };
  const auto duplicate = [&](std::int64_t r, std::int64_t j, std::int32_t v, std::int64_t first) {
    fail("mask.indices", fmt::format("indices[{}] = {} of {} duplicates indices[{}] (a kv block may appear once "
                                     "per row)", j, v, row_name(m, r), first));
  };
  // n_kvb is a declared extent (the arrays are [rows, K_max]): a table of n_kvb slots is only allocated when it is
  // not much larger than the lists (an n_kvb near 2^31 once allocated 16 GiB here; found by tests/fuzz,
  // regressions/mask_state/index_lists_huge_n_kvb). Otherwise each row is sorted. Both report the same first error:
  // the smallest j that is out of range or repeats an earlier entry.
  if (m.n_kvb <= std::max<std::int64_t>(std::int64_t(1) << 16, 4 * k_max)) {
    std::vector<std::int64_t> seen_at(static_cast<std::size_t>(m.n_kvb), -1);  // position of each kv block in a row
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int32_t* row = idx + r * k_max;
      for (std::int64_t j = 0; j < cnt[r]; ++j) {
        const std::int32_t v = row[j];
        if (v < 0 || v >= m.n_kvb) out_of_range(r, j, v);
        if (seen_at[v] >= 0) duplicate(r, j, v, seen_at[v]);
        seen_at[v] = j;
      }
      for (std::int64_t j = 0; j < cnt[r]; ++j) seen_at[row[j]] = -1;
    }
    return;
  }
  std::vector<std::pair<std::int32_t, std::int64_t>> sorted;  // (kv block, position) of one row's valid prefix
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int32_t* row = idx + r * k_max;
    std::int64_t j0 = 0;  // first entry out of range (cnt[r] when none)
    while (j0 < cnt[r] && row[j0] >= 0 && row[j0] < m.n_kvb) ++j0;
    sorted.clear();
    for (std::int64_t j = 0; j < j0; ++j) sorted.emplace_back(row[j], j);
    std::sort(sorted.begin(), sorted.end());
    std::int64_t dup = -1, first = -1;  // the smallest position that repeats an earlier entry, and that entry
    for (std::size_t i = 1; i < sorted.size(); ++i)
      if (sorted[i].first == sorted[i - 1].first && (sorted[i - 1].first != (i >= 2 ? sorted[i - 2].first : -1)) &&
          (dup < 0 || sorted[i].second < dup)) {
        dup = sorted[i].second;  // the second occurrence of this block (the first of its group is sorted[i - 1])
        first = sorted[i - 1].second;
      }
    if (dup >= 0) duplicate(r, dup, row[dup], first);
    if (j0 < cnt[r]) out_of_range(r, j0, row[j0]);
  }
}

}  // namespace

void check_mask_contents_host(const BlockMask& mask) {
  switch (mask.format) {
    case MaskFormat::kDense: return;
    case MaskFormat::kBlockCsr: check_csr(mask); return;
    case MaskFormat::kIndexLists: check_index_lists(mask); return;
  }
}

}  // namespace tessera::detail
