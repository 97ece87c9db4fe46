#pragma once
/// @file mask_state.hpp
/// The shared mask state mu(M) (DESIGN.md section 5): the mask in canonical block-CSR form plus scalar
/// statistics s(M). Broadcast extents are kept (a mask with H_m = 1 has n_qb rows per batch, not H_q * n_qb).
#include <cstdint>
#include <vector>

#include "tessera/mask.hpp"

namespace tessera {

/// Extents of a mask: B_m, H_m, n_qb, n_kvb.
struct MaskShape {
  std::int64_t batch = 1;
  std::int64_t heads = 1;
  std::int64_t n_qb = 0;
  std::int64_t n_kvb = 0;
  std::int64_t rows() const noexcept { return batch * heads * n_qb; }
  std::int64_t total_blocks() const noexcept { return rows() * n_kvb; }
  bool operator==(const MaskShape&) const = default;
};

/// Integer counters of a mask, computed identically on the CPU and the GPU. A *run* is a maximal sequence of
/// active blocks with consecutive kv-block indices within one row.
struct MaskCounters {
  std::int64_t active_blocks = 0;       ///< nnz
  std::int64_t runs = 0;                ///< number of runs over all rows
  std::int64_t blocks_in_long_runs = 0; ///< active blocks that sit in runs of length >= 2
  std::int64_t max_row_active = 0;      ///< max active blocks in one row
  std::int64_t empty_rows = 0;          ///< rows with no active block
  /// (query block, kv block) pairs that Coarsened-Q computes when c = 2, 4, 8 consecutive query blocks of one
  /// (batch, head) share a CTA: the sum over the aligned groups {g c, ..., g c + c - 1} (the last one may be short)
  /// of (rows in the group) x |union of their kv blocks|. Equal to active_blocks when every group's rows have the
  /// same list; c x active_blocks when no two rows of a group share a block. Index 0, 1, 2: c = 2, 4, 8. -1 where
  /// they were not counted (the GPU builder when the request's selection does not use them).
  std::int64_t coarsened_pairs[3] = {0, 0, 0};
  bool operator==(const MaskCounters&) const = default;
};

/// Scalar statistics s(M), derived on the host from MaskCounters and MaskShape (so CPU and GPU agree bit for bit).
struct MaskStats {
  MaskShape shape;
  MaskCounters counters;
  double density = 0;          ///< active blocks / total blocks (0 for a mask with no blocks)
  double run_coverage = 0;     ///< blocks_in_long_runs / active blocks (0 for an empty mask)
  double mean_run_length = 0;  ///< active blocks / runs (0 for an empty mask)
  double mean_row_active = 0;  ///< active blocks / rows
  double row_imbalance = 0;    ///< max_row_active / mean_row_active, >= 1 (0 for an empty mask)
  std::int64_t max_row_active = 0;
  std::int64_t empty_rows = 0;
  /// What coarsening the query blocks costs in computed pairs, per doubling (0 for an empty mask):
  /// coarsen_cost[0] = coarsened_pairs(2) / active_blocks, [1] = pairs(4) / pairs(2), [2] = pairs(8) / pairs(4);
  /// each in [1, 2] (rows of one group with identical lists: 1; disjoint: 2). Measured on the H200 (bench/NOTES.md,
  /// session 19), the fastest factor for 16- and 32-token query blocks doubles while this stays below ~1.3.
  /// NaN where the pairs were not counted (MaskCounters::coarsened_pairs = -1).
  double coarsen_cost[3] = {0, 0, 0};
  bool operator==(const MaskStats&) const = default;
};

/// Derives MaskStats from counters (the only place the ratios are computed).
MaskStats derive_mask_stats(const MaskShape& shape, const MaskCounters& counters) noexcept;

/// Counts a canonical block-CSR in host memory into MaskCounters (no validation): row_offsets int32 [rows + 1],
/// col_indices int32 [nnz], strictly increasing within each row.
/// `shape` gives the rows (shape.rows()) and how they group into heads (n_qb) and kv blocks (n_kvb, the column
/// range) for the coarsened pair counts.
MaskCounters count_mask_csr(const MaskShape& shape, const std::int32_t* row_offsets, const std::int32_t* col_indices);

/// mu(M) in host memory: canonical block-CSR (row_offsets [rows+1], col_indices [nnz], strictly increasing per row).
struct HostMaskState {
  MaskShape shape;
  std::vector<std::int32_t> row_offsets;
  std::vector<std::int32_t> col_indices;
  MaskStats stats;
};

/// Builds mu(M) on the CPU from a mask whose tensors are in CPU memory. Validates the mask's structure and contents
/// and throws tessera::Error (kInvalidArgument, naming "mask.<field>") on wrong shapes/dtypes and on out-of-range,
/// unsorted or duplicate indices; kUnsupported when the mask has more than 2^31 - 1 active blocks. Index lists
/// may be unsorted within a row: each row is sorted. Rows: (b_m * H_m + h_m) * n_qb + qb.
HostMaskState build_mask_state_cpu(const BlockMask& mask);

}  // namespace tessera
