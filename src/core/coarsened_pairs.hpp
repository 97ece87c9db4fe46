#pragma once
// The coarsened pairs of one aligned group of query-block rows (MaskCounters::coarsened_pairs, include/tessera/
// mask_state.hpp), host and device (TESSERA_HD): count_mask_csr() and the GPU's merge kernel
// (src/cuda/mask_state_coarsen.cu) both count through it.
#include <cstdint>

#include "core/hd.hpp"

namespace tessera::detail {

/// Rows of a group of n query-block rows that fall in the subgroup of `size` rows starting at row `first` (a pair,
/// quad or octet; the last group of a head may be short, so this is in [0, size]).
TESSERA_HD constexpr int subgroup_rows(int n, int first, int size) {
  const int rows = n - first;
  return rows < 0 ? 0 : rows > size ? size : rows;
}

/// One group of n <= 8 consecutive query-block rows of one (batch, head): merges the rows' sorted column lists
/// cols[pos[r], end[r]) (pos[r] == end[r] for r >= n) and adds, for every distinct column in [0, n_kvb), the number
/// of rows of each pair, quad and octet that computes it (the subgroup's rows, when any of them holds it) to
/// pairs[0], [1], [2]. Columns outside [0, n_kvb) are skipped (an invalid mask, whose counts are discarded). `pos`
/// is consumed. Loops run over all 8 slots so that the arrays stay in registers on the device.
TESSERA_HD inline void add_group_coarsened_pairs(const std::int32_t* cols, std::int64_t (&pos)[8],
                                                 const std::int64_t (&end)[8], int n, std::int64_t n_kvb,
                                                 std::int64_t (&pairs)[3]) {
  std::int64_t distinct2[4] = {0, 0, 0, 0}, distinct4[2] = {0, 0}, distinct8 = 0;
  for (;;) {
    std::int32_t col = 0;
    bool any = false;
    for (int r = 0; r < 8; ++r)
      if (pos[r] < end[r] && (!any || cols[pos[r]] < col)) col = cols[pos[r]], any = true;
    if (!any) break;
    unsigned holds = 0;  // bit r: row r holds `col`
    for (int r = 0; r < 8; ++r)
      if (pos[r] < end[r] && cols[pos[r]] == col) holds |= 1u << r, ++pos[r];
    if (col < 0 || col >= n_kvb) continue;
    for (int p = 0; p < 4; ++p) distinct2[p] += (holds >> (2 * p)) & 3u ? 1 : 0;
    for (int q = 0; q < 2; ++q) distinct4[q] += (holds >> (4 * q)) & 15u ? 1 : 0;
    ++distinct8;
  }
  // Every row of a subgroup computes its union; the last group of a head may be short.
  for (int p = 0; p < 4; ++p) pairs[0] += distinct2[p] * subgroup_rows(n, 2 * p, 2);
  for (int q = 0; q < 2; ++q) pairs[1] += distinct4[q] * subgroup_rows(n, 4 * q, 4);
  pairs[2] += distinct8 * subgroup_rows(n, 0, 8);
}

}  // namespace tessera::detail
