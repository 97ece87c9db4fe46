// Structure checks of a BlockMask (ranks, dtypes, shapes, layout, device, 32-bit limits).
#include <fmt/format.h>

#include "core/mask_checks.hpp"

namespace tessera::detail {

std::string shape_string(const std::int64_t* shape, int rank) {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

namespace {

[[noreturn]] void fail(const std::string& argument, const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, argument, message);
}

/// Checks presence, rank, dtype and (optionally) exact shape and contiguity of one int32 mask array.
void check_index_array(const TensorView& t, const char* name, int rank, const std::int64_t* expected_shape,
                       const char* shape_doc) {
  if (t.data == nullptr && !(t.rank >= 1 && t.numel() == 0)) fail(name, "data pointer is null (tensor not given)");
  if (t.rank != rank) fail(name, fmt::format("expected rank {} {}, got rank {}", rank, shape_doc, t.rank));
  if (t.dtype != DType::kInt32) fail(name, fmt::format("dtype must be i32, got {}", dtype_name(t.dtype)));
  for (int d = 0; d < rank; ++d) {
    if (t.shape[d] < 0) fail(name, fmt::format("negative extent in shape {}", shape_string(t.shape.data(), rank)));
    if (expected_shape && t.shape[d] != expected_shape[d]) {
      fail(name, fmt::format("shape {} does not match the expected {} = {}", shape_string(t.shape.data(), rank),
                             shape_doc, shape_string(expected_shape, rank)));
    }
  }
  if (!t.is_contiguous()) {
    fail(name, fmt::format("must be contiguous; shape {} has strides {}", shape_string(t.shape.data(), rank),
                           shape_string(t.stride.data(), rank)));
  }
}

}  // namespace

Device check_mask_structure(const BlockMask& mask) {
  if (mask.batch < 1 || mask.heads < 1 || mask.n_qb < 1 || mask.n_kvb < 1) {
    fail("mask", fmt::format("extents must be positive: B_m = {}, H_m = {}, n_qb = {}, n_kvb = {}", mask.batch,
                             mask.heads, mask.n_qb, mask.n_kvb));
  }
  if (mask.n_kvb > kMaxMaskActiveBlocks || mask.n_qb > kMaxMaskRows || mask.batch > kMaxMaskRows ||
      mask.heads > kMaxMaskRows || mask.batch * mask.heads > kMaxMaskRows ||
      mask.batch * mask.heads * mask.n_qb > kMaxMaskRows) {
    fail("mask", fmt::format("B_m * H_m * n_qb = {} * {} * {} rows (n_kvb = {}) exceeds the 32-bit limit {}",
                             mask.batch, mask.heads, mask.n_qb, mask.n_kvb, kMaxMaskRows));
  }
  const std::int64_t rows = mask.rows();
  switch (mask.format) {
    case MaskFormat::kDense: {
      const TensorView& t = mask.dense;
      if (t.data == nullptr) fail("mask.dense", "data pointer is null (tensor not given)");
      if (t.rank != 4) fail("mask.dense", fmt::format("expected rank 4 [B_m, H_m, n_qb, n_kvb], got rank {}", t.rank));
      if (t.dtype != DType::kBool && t.dtype != DType::kUInt8) {
        fail("mask.dense", fmt::format("dtype must be bool or u8, got {}", dtype_name(t.dtype)));
      }
      const std::int64_t expected[4] = {mask.batch, mask.heads, mask.n_qb, mask.n_kvb};
      for (int d = 0; d < 4; ++d) {
        if (t.shape[d] != expected[d]) {
          fail("mask.dense", fmt::format("shape {} does not match the mask extents [B_m, H_m, n_qb, n_kvb] = {}",
                                         shape_string(t.shape.data(), 4), shape_string(expected, 4)));
        }
      }
      for (int d = 0; d < 4; ++d) {
        if (t.shape[d] > 1 && t.stride[d] <= 0) {
          fail("mask.dense", fmt::format("stride[{}] = {} must be positive for a dimension of extent {}", d,
                                         t.stride[d], t.shape[d]));
        }
      }
      return t.device;
    }
    case MaskFormat::kBlockCsr: {
      const std::int64_t off_shape[1] = {rows + 1};
      check_index_array(mask.row_offsets, "mask.row_offsets", 1, off_shape, "[B_m*H_m*n_qb + 1]");
      check_index_array(mask.col_indices, "mask.col_indices", 1, nullptr, "[nnz]");
      if (mask.col_indices.shape[0] > kMaxMaskActiveBlocks) {
        fail("mask.col_indices", fmt::format("nnz = {} exceeds the 32-bit limit {}", mask.col_indices.shape[0],
                                             kMaxMaskActiveBlocks));
      }
      if (mask.row_offsets.device != mask.col_indices.device) {
        fail("mask.col_indices", "row_offsets and col_indices must be on the same device");
      }
      return mask.row_offsets.device;
    }
    case MaskFormat::kIndexLists: {
      const std::int64_t cnt_shape[3] = {mask.batch, mask.heads, mask.n_qb};
      check_index_array(mask.counts, "mask.counts", 3, cnt_shape, "[B_m, H_m, n_qb]");
      check_index_array(mask.indices, "mask.indices", 4, nullptr, "[B_m, H_m, n_qb, K_max]");
      const std::int64_t idx_shape[4] = {mask.batch, mask.heads, mask.n_qb, mask.indices.shape[3]};
      check_index_array(mask.indices, "mask.indices", 4, idx_shape, "[B_m, H_m, n_qb, K_max]");
      if (mask.indices.shape[3] > kMaxMaskActiveBlocks) {
        fail("mask.indices", fmt::format("K_max = {} exceeds the 32-bit limit", mask.indices.shape[3]));
      }
      if (mask.counts.device != mask.indices.device) {
        fail("mask.indices", "counts and indices must be on the same device");
      }
      return mask.counts.device;
    }
  }
  fail("mask", "unknown mask format");
}

}  // namespace tessera::detail
