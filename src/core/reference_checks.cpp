#include "core/reference_checks.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <utility>
#include <array>
#include <cstdint>
#include <string>

#include "tessera/error.hpp"
#include "tessera/geometry.hpp"

namespace tessera::detail {
namespace {

[[noreturn]] void fail(const std::string& argument, const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, argument, message);
}

std::string shape_string(const TensorView& t) {
  std::string s = "[";
  for (int i = 0; i < t.rank; ++i) s += (i ? ", " : "") + std::to_string(t.shape[i]);
  return s + "]";
}

bool is_float_input(DType t, ReferencePath path) {
  switch (t) {
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat32: return true;
    case DType::kFloat64: return path == ReferencePath::kCpu;
    default: return false;
  }
}

/// Common checks of a rank-`rank` tensor: given, rank, device, non-negative extents, data pointer and alignment.
void check_tensor_basics(const TensorView& t, const std::string& name, int rank, Device device,
                         const char* layout) {
  if (t.rank != rank) fail(name, fmt::format("expected rank {} {}, got rank {}", rank, layout, t.rank));
  for (int i = 0; i < rank; ++i)
    if (t.shape[i] < 0) fail(name + ".shape", fmt::format("negative extent in {}", shape_string(t)));
  if (t.device != device)
    fail(name + ".device", device == Device::kCpu ? "must be in CPU memory" : "must be in GPU memory");
  if (t.numel() > 0 && t.data == nullptr) fail(name + ".data", "is null for a non-empty tensor");
  const auto addr = reinterpret_cast<std::uintptr_t>(t.data);
  if (addr % dtype_size(t.dtype) != 0)
    fail(name + ".data", fmt::format("is not aligned to its element size ({} bytes)", dtype_size(t.dtype)));
}

/// Rank-4 attention tensor: head dimension contiguous (stride 1).
void check_head_dim_contiguous(const TensorView& t, const std::string& name) {
  if (t.shape[3] > 1 && t.stride[3] != 1)
    fail(name + ".stride", fmt::format("head dimension must be contiguous (stride 1), got stride {}", t.stride[3]));
}

/// An output view must not have two indices that address the same element: sorted by |stride|, each dimension's
/// stride must exceed the span of all smaller ones.
void check_non_overlapping(const TensorView& t, const std::string& name) {
  std::array<int, kMaxRank> dims{};
  int n = 0;
  for (int i = 0; i < t.rank; ++i)
    if (t.shape[i] > 1) dims[n++] = i;
  for (int i = 1; i < n; ++i)  // insertion sort by |stride| (at most 4 entries)
    for (int j = i; j > 0 && std::abs(t.stride[dims[j]]) < std::abs(t.stride[dims[j - 1]]); --j)
      std::swap(dims[j], dims[j - 1]);
  std::int64_t span = 0;  // largest offset reachable with the dimensions so far
  for (int k = 0; k < n; ++k) {
    const std::int64_t s = std::abs(t.stride[dims[k]]);
    if (s <= span) fail(name + ".stride", fmt::format("strides make elements overlap (shape {})", shape_string(t)));
    span += s * (t.shape[dims[k]] - 1);
  }
}

void check_block_size(int block, const char* name) {
  if (block < kMinBlockSize || block > kMaxBlockSize || block % 16 != 0)
    fail(name, fmt::format("must be a multiple of 16 in [{}, {}], got {}", kMinBlockSize, kMaxBlockSize, block));
}

}  // namespace

ProblemShape check_reference_request(const AttentionRequest& r, const MaskShape& mask_shape, ReferencePath path) {
  const Device dev = path == ReferencePath::kCpu ? Device::kCpu : Device::kCuda;
  const char* qlayout = "[B, N_q, H_q, D]";
  const char* kvlayout = "[B, N_kv, H_kv, D]";
  check_tensor_basics(r.q, "q", 4, dev, qlayout);
  check_tensor_basics(r.k, "k", 4, dev, kvlayout);
  check_tensor_basics(r.v, "v", 4, dev, kvlayout);
  if (!is_float_input(r.q.dtype, path))
    fail("q.dtype", fmt::format("must be {}, got {}", path == ReferencePath::kCpu ? "f16, bf16, f32 or f64" : "f16, bf16 or f32",
                                dtype_name(r.q.dtype)));
  if (r.k.dtype != r.q.dtype)
    fail("k.dtype", fmt::format("must equal q's dtype {}, got {}", dtype_name(r.q.dtype), dtype_name(r.k.dtype)));
  if (r.v.dtype != r.q.dtype)
    fail("v.dtype", fmt::format("must equal q's dtype {}, got {}", dtype_name(r.q.dtype), dtype_name(r.v.dtype)));

  ProblemShape p;
  p.batch = r.q.shape[0];
  p.n_q = r.q.shape[1];
  p.heads_q = r.q.shape[2];
  p.head_dim = r.q.shape[3];
  p.n_kv = r.k.shape[1];
  p.heads_kv = r.k.shape[2];
  if (p.head_dim < 1) fail("q.shape", "head_dim must be at least 1");
  if (path == ReferencePath::kGpu && p.head_dim > kReferenceGpuMaxHeadDim)
    throw Error(ErrorCode::kUnsupported, "q.shape",
                fmt::format("the GPU reference supports head_dim <= {}, got {}", kReferenceGpuMaxHeadDim, p.head_dim));
  if (r.k.shape[0] != p.batch || r.k.shape[3] != p.head_dim)
    fail("k.shape", fmt::format("expected [{}, N_kv, H_kv, {}] to match q {}, got {}", p.batch, p.head_dim,
                                shape_string(r.q), shape_string(r.k)));
  for (int i = 0; i < 4; ++i)
    if (r.v.shape[i] != r.k.shape[i])
      fail("v.shape", fmt::format("must equal k's shape {}, got {}", shape_string(r.k), shape_string(r.v)));
  if (p.heads_kv < 1 || p.heads_q % p.heads_kv != 0)
    fail("k.shape", fmt::format("H_q ({}) must be a positive multiple of H_kv ({})", p.heads_q, p.heads_kv));
  check_head_dim_contiguous(r.q, "q");
  check_head_dim_contiguous(r.k, "k");
  check_head_dim_contiguous(r.v, "v");

  if (path == ReferencePath::kGpu) {
    check_tensor_basics(r.o, "o", 4, dev, qlayout);
    if (r.o.dtype != DType::kFloat16 && r.o.dtype != DType::kBFloat16 && r.o.dtype != DType::kFloat32)
      fail("o.dtype", fmt::format("must be f16, bf16 or f32, got {}", dtype_name(r.o.dtype)));
    for (int i = 0; i < 4; ++i)
      if (r.o.shape[i] != r.q.shape[i])
        fail("o.shape", fmt::format("must equal q's shape {}, got {}", shape_string(r.q), shape_string(r.o)));
    check_head_dim_contiguous(r.o, "o");
    check_non_overlapping(r.o, "o");
    if (!r.lse.empty()) {
      check_tensor_basics(r.lse, "lse", 3, dev, "[B, H_q, N_q]");
      if (r.lse.dtype != DType::kFloat32) fail("lse.dtype", fmt::format("must be f32, got {}", dtype_name(r.lse.dtype)));
      if (r.lse.shape[0] != p.batch || r.lse.shape[1] != p.heads_q || r.lse.shape[2] != p.n_q)
        fail("lse.shape", fmt::format("expected [{}, {}, {}], got {}", p.batch, p.heads_q, p.n_q, shape_string(r.lse)));
      check_non_overlapping(r.lse, "lse");
    }
  }

  check_block_size(r.geometry.block_q, "geometry.block_q");
  check_block_size(r.geometry.block_kv, "geometry.block_kv");
  p.n_qb = num_blocks(p.n_q, r.geometry.block_q);
  p.n_kvb = num_blocks(p.n_kv, r.geometry.block_kv);

  if (mask_shape.batch != 1 && mask_shape.batch != p.batch)
    fail("mask.batch", fmt::format("must be 1 or B = {}, got {}", p.batch, mask_shape.batch));
  if (mask_shape.heads != 1 && mask_shape.heads != p.heads_q)
    fail("mask.heads", fmt::format("must be 1 or H_q = {}, got {}", p.heads_q, mask_shape.heads));
  if (mask_shape.n_qb != p.n_qb)
    fail("mask.n_qb", fmt::format("must be ceil(N_q / B_Q) = ceil({} / {}) = {}, got {}", p.n_q, r.geometry.block_q,
                                  p.n_qb, mask_shape.n_qb));
  if (mask_shape.n_kvb != p.n_kvb)
    fail("mask.n_kvb", fmt::format("must be ceil(N_kv / B_KV) = ceil({} / {}) = {}, got {}", p.n_kv,
                                   r.geometry.block_kv, p.n_kvb, mask_shape.n_kvb));
  return p;
}

void check_host_mask_state(const HostMaskState& mask) {
  const std::int64_t rows = mask.shape.rows();
  const auto& off = mask.row_offsets;
  const auto& cols = mask.col_indices;
  if (static_cast<std::int64_t>(off.size()) != rows + 1)
    fail("mask.row_offsets", fmt::format("must have rows + 1 = {} entries, got {}", rows + 1, off.size()));
  if (off[0] != 0) fail("mask.row_offsets", fmt::format("must start at 0, got {}", off[0]));
  if (static_cast<std::size_t>(off[rows]) != cols.size())
    fail("mask.row_offsets", fmt::format("must end at nnz = {}, got {}", cols.size(), off[rows]));
  for (std::int64_t row = 0; row < rows; ++row)
    if (off[row + 1] < off[row])
      fail("mask.row_offsets", fmt::format("decreases at row {} ({} -> {})", row, off[row], off[row + 1]));
  for (std::int64_t row = 0; row < rows; ++row) {
    for (std::int32_t a = off[row]; a < off[row + 1]; ++a) {
      if (cols[a] < 0 || cols[a] >= mask.shape.n_kvb)
        fail("mask.col_indices", fmt::format("entry {} (row {}) = {} is outside [0, {})", a, row, cols[a],
                                             mask.shape.n_kvb));
      if (a > off[row] && cols[a] <= cols[a - 1])
        fail("mask.col_indices", fmt::format("row {} is not strictly increasing at entry {}", row, a));
    }
  }
}

}  // namespace tessera::detail
