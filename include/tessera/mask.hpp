#pragma once
/// @file mask.hpp
/// The logical block mask M in its three standard formats (DESIGN.md section 2). The mask has its own batch
/// and head extents B_m in {1, B} and H_m in {1, H_q}; a size-1 extent broadcasts over the request's batch or
/// query heads. Rows are numbered row = (b_m * H_m + h_m) * n_qb + qb.
#include <cstdint>

#include "tessera/tensor.hpp"

namespace tessera {

/// Which of the three formats a BlockMask holds.
enum class MaskFormat : std::uint8_t {
  kDense,       ///< bool/uint8 [B_m, H_m, n_qb, n_kvb]; non-zero = active
  kBlockCsr,    ///< int32 row_offsets [B_m*H_m*n_qb + 1], col_indices [nnz], strictly increasing per row
  kIndexLists,  ///< int32 counts [B_m, H_m, n_qb], indices [B_m, H_m, n_qb, K_max] (FlexAttention's
                ///< kv_num_blocks / kv_indices, VSA top-k lists): the first counts[...] entries of a row are
                ///< its active kv blocks, in any order, without duplicates; entries past the count are ignored.
};

/// Name of a mask format: "dense", "block-csr", "index-lists".
const char* mask_format_name(MaskFormat f) noexcept;

/// A logical block mask. Build it with one of the factory functions; they fill the extents.
/// The tensors may live on the CPU or the GPU (all of one mask on the same device).
struct BlockMask {
  MaskFormat format = MaskFormat::kDense;
  std::int64_t batch = 1;  ///< B_m (1 = broadcast over the request batch)
  std::int64_t heads = 1;  ///< H_m (1 = broadcast over query heads)
  std::int64_t n_qb = 0;   ///< query blocks, must equal ceil(N_q / B_Q)
  std::int64_t n_kvb = 0;  ///< kv blocks, must equal ceil(N_kv / B_KV)

  TensorView dense;        ///< kDense: [B_m, H_m, n_qb, n_kvb], bool or uint8, any strides
  TensorView row_offsets;  ///< kBlockCsr: [B_m*H_m*n_qb + 1] int32, contiguous
  TensorView col_indices;  ///< kBlockCsr: [nnz] int32, contiguous
  TensorView counts;       ///< kIndexLists: [B_m, H_m, n_qb] int32, contiguous
  TensorView indices;      ///< kIndexLists: [B_m, H_m, n_qb, K_max] int32, contiguous

  /// Number of mask rows, B_m * H_m * n_qb.
  std::int64_t rows() const noexcept { return batch * heads * n_qb; }

  /// Dense mask; extents are read from the tensor's shape (must be rank 4).
  static BlockMask from_dense(const TensorView& dense);
  /// Block-CSR; extents are given because the arrays alone do not carry them.
  static BlockMask from_block_csr(const TensorView& row_offsets, const TensorView& col_indices, std::int64_t batch,
                                  std::int64_t heads, std::int64_t n_qb, std::int64_t n_kvb);
  /// Index lists; B_m, H_m and n_qb are read from `counts` (rank 3), n_kvb must be given (K_max is not n_kvb).
  static BlockMask from_index_lists(const TensorView& counts, const TensorView& indices, std::int64_t n_kvb);
};

}  // namespace tessera
