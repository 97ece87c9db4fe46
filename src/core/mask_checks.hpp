#pragma once
// Internal checks of a BlockMask shared by validate_request(), build_mask_state_cpu() and build_mask_state_gpu().
// Structure (ranks, dtypes, extents, contiguity, devices) and, for masks in host memory, contents.
#include <cstdint>
#include <string>

#include "tessera/error.hpp"
#include "tessera/mask.hpp"
#include "tessera/mask_state.hpp"

namespace tessera::detail {

/// Rows of a mask must fit int32 (block-CSR offsets and the kernels' row ids are int32).
inline constexpr std::int64_t kMaxMaskRows = 0x7fffffffLL - 1;
/// Active blocks of a mask must fit int32 (block-CSR offsets are int32).
inline constexpr std::int64_t kMaxMaskActiveBlocks = 0x7fffffffLL;

/// Checks the structure of `mask` on its own (not against a request): extents positive and within 32-bit limits,
/// the tensors of its format present, non-null, of the right rank, shape, dtype and layout, all on one device.
/// Throws Error(kInvalidArgument) naming "mask", "mask.dense", "mask.row_offsets", "mask.col_indices",
/// "mask.counts" or "mask.indices". Returns the device the mask lives on.
Device check_mask_structure(const BlockMask& mask);

/// K_max of an index-list mask (indices.shape[3]); 0 for other formats.
inline std::int64_t mask_k_max(const BlockMask& mask) noexcept {
  return mask.format == MaskFormat::kIndexLists && mask.indices.rank == 4 ? mask.indices.shape[3] : 0;
}

/// Extents of a mask as a MaskShape.
inline MaskShape mask_shape(const BlockMask& mask) noexcept { return {mask.batch, mask.heads, mask.n_qb, mask.n_kvb}; }

/// Checks the contents of a structurally valid mask in host memory, in a fixed order (the GPU path replays this
/// function on a host copy, so both report the same first error):
///   block-CSR:   row_offsets[0] == 0; row_offsets non-decreasing; row_offsets[rows] == nnz; then row by row,
///                position by position, every column in [0, n_kvb) and greater than the previous one of its row;
///   index lists: every count in [0, K_max]; then row by row, position by position, every index in [0, n_kvb)
///                and not equal to an earlier index of its row;
///   dense:       nothing (every byte value is valid).
/// Throws Error(kInvalidArgument) naming "mask.row_offsets", "mask.col_indices", "mask.counts" or "mask.indices".
void check_mask_contents_host(const BlockMask& mask);

/// "[a, b, c]" of the first `rank` extents of a shape (messages).
std::string shape_string(const std::int64_t* shape, int rank);

}  // namespace tessera::detail
