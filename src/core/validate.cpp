// validate_request(): checks an AttentionRequest against DESIGN.md section 2 before anything touches the GPU.
#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <optional>

#include "core/mask_checks.hpp"
#include "tessera/error.hpp"
#include "tessera/request.hpp"

namespace tessera {

namespace {

using detail::shape_string;

constexpr std::int64_t kMaxTokens = std::numeric_limits<std::int32_t>::max();  // N < 2^31

[[noreturn]] void fail(const std::string& argument, const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, argument, message);
}

const char* device_name(Device d) { return d == Device::kCpu ? "cpu" : "cuda"; }

bool is_attention_dtype(DType t) { return t == DType::kBFloat16 || t == DType::kFloat16; }
bool is_reference_dtype(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }

/// Largest element offset a view reaches: the sum over dimensions of extent > 1 of (extent - 1) * stride (strides
/// of those dimensions positive); std::nullopt when it overflows 64 bits.
std::optional<std::int64_t> max_element_offset(const TensorView& t) {
  std::int64_t max_offset = 0;
  for (int d = 0; d < t.rank; ++d) {
    std::int64_t span = 0;
    if (t.shape[d] > 1 && (__builtin_mul_overflow(t.shape[d] - 1, t.stride[d], &span) ||
                           __builtin_add_overflow(max_offset, span, &max_offset)))
      return std::nullopt;
  }
  return max_offset;
}

/// Rank, extents, strides and addressability of a [B, N, H, D] tensor.
void check_bnhd(const TensorView& t, const std::string& name) {
  if (t.data == nullptr) fail(name, "data pointer is null (tensor not given)");
  if (t.rank != 4) fail(name, fmt::format("expected rank 4 [B, N, H, D], got rank {}", t.rank));
  for (int d = 0; d < 4; ++d) {
    if (t.shape[d] < 1) {
      fail(name + ".shape", fmt::format("extents must be positive, got {}", shape_string(t.shape.data(), 4)));
    }
  }
  if (t.shape[1] > kMaxTokens) {
    fail(name + ".shape", fmt::format("N = {} tokens exceeds the 32-bit limit {}", t.shape[1], kMaxTokens));
  }
  if (t.stride[3] != 1 && t.shape[3] > 1) {
    fail(name + ".stride", fmt::format("the head dimension must be contiguous (stride[3] == 1), got strides {}",
                                       shape_string(t.stride.data(), 4)));
  }
  for (int d = 0; d < 4; ++d) {
    if (t.shape[d] > 1 && t.stride[d] <= 0) {
      fail(name + ".stride", fmt::format("stride[{}] = {} must be positive for a dimension of extent {} (strides {})",
                                         d, t.stride[d], t.shape[d], shape_string(t.stride.data(), 4)));
    }
  }
  if (!max_element_offset(t)) {
    fail(name + ".stride", fmt::format("element offsets of shape {} with strides {} overflow 64 bits",
                                       shape_string(t.shape.data(), 4), shape_string(t.stride.data(), 4)));
  }
}

void check_same_device(const TensorView& t, const std::string& name, Device q_device) {
  if (t.device != q_device) {
    fail(name, fmt::format("is on {} but q is on {} (all tensors of a request must be on one device)",
                           device_name(t.device), device_name(q_device)));
  }
}

void check_geometry(const BlockGeometry& g) {
  auto check = [](int size, const char* name, const char* sym) {
    if (!is_block_size(size)) {
      fail(name, fmt::format("{} = {} must be a multiple of 16 in [{}, {}]", sym, size, kMinBlockSize, kMaxBlockSize));
    }
  };
  check(g.block_q, "geometry.block_q", "B_Q");
  check(g.block_kv, "geometry.block_kv", "B_KV");
}

void check_dtypes(const AttentionRequest& r, const ValidateOptions& options) {
  const DType t = r.q.dtype;
  if (is_reference_dtype(t)) {
    if (!options.allow_reference_dtypes) {
      throw Error(
          ErrorCode::kUnsupported, "q",
          fmt::format("dtype {} is accepted by the reference paths only (kernels take bf16 or f16)", dtype_name(t)));
    }
  } else if (!is_attention_dtype(t)) {
    fail("q", fmt::format("dtype must be bf16 or f16, got {}", dtype_name(t)));
  }
  if (r.k.dtype != t)
    fail("k", fmt::format("dtype {} differs from q's dtype {}", dtype_name(r.k.dtype), dtype_name(t)));
  if (r.v.dtype != t)
    fail("v", fmt::format("dtype {} differs from q's dtype {}", dtype_name(r.v.dtype), dtype_name(t)));
  const DType o = r.o.dtype;
  const bool o_ok = o == t || (options.allow_reference_dtypes && is_reference_dtype(o));
  if (!o_ok) {
    fail("o", fmt::format("dtype {} must equal q's dtype {}{}", dtype_name(o), dtype_name(t),
                          options.allow_reference_dtypes ? " (or be f32/f64)" : ""));
  }
}

void check_head_dim(std::int64_t d, const ValidateOptions& options) {
  if (options.allow_reference_dtypes) {
    if (d > 512) fail("head_dim", fmt::format("head_dim {} exceeds 512 (reference paths)", d));
    return;
  }
  if (d == 64 || d == 128) return;
  if (d == 96 || d == 256) {
    throw Error(ErrorCode::kUnsupported, "head_dim",
                fmt::format("head_dim {} is not yet supported (supported: 64, 128)", d));
  }
  fail("head_dim", fmt::format("head_dim {} is not a head dimension Tessera supports (64, 128; 96 and 256 later)", d));
}

void check_lse(const TensorView& lse, const ProblemShape& p, Device q_device, bool allow_f64) {
  if (lse.empty()) return;
  if (lse.data == nullptr) fail("lse", "data pointer is null");
  if (lse.rank != 3) fail("lse", fmt::format("expected rank 3 [B, H_q, N_q], got rank {}", lse.rank));
  if (lse.dtype != DType::kFloat32 && !(allow_f64 && lse.dtype == DType::kFloat64))
    fail("lse", fmt::format("dtype must be f32{}, got {}", allow_f64 ? " or f64" : "", dtype_name(lse.dtype)));
  const std::int64_t expected[3] = {p.batch, p.heads_q, p.n_q};
  for (int d = 0; d < 3; ++d) {
    if (lse.shape[d] != expected[d]) {
      fail("lse", fmt::format("shape {} does not match [B, H_q, N_q] = {}", shape_string(lse.shape.data(), 3),
                              shape_string(expected, 3)));
    }
  }
  for (int d = 0; d < 3; ++d) {
    if (lse.shape[d] > 1 && lse.stride[d] <= 0) {
      fail("lse.stride", fmt::format("stride[{}] = {} must be positive for a dimension of extent {}", d, lse.stride[d],
                                     lse.shape[d]));
    }
  }
  check_same_device(lse, "lse", q_device);
}

void check_mask_against_request(const BlockMask& m, const ProblemShape& p, const BlockGeometry& g, Device q_device) {
  if (m.n_qb != p.n_qb) {
    fail("mask.n_qb", fmt::format("n_qb = {} does not match ceil(N_q / B_Q) = ceil({} / {}) = {}", m.n_qb, p.n_q,
                                  g.block_q, p.n_qb));
  }
  if (m.n_kvb != p.n_kvb) {
    fail("mask.n_kvb", fmt::format("n_kvb = {} does not match ceil(N_kv / B_KV) = ceil({} / {}) = {}", m.n_kvb, p.n_kv,
                                   g.block_kv, p.n_kvb));
  }
  if (m.batch != 1 && m.batch != p.batch) {
    fail("mask.batch", fmt::format("B_m = {} must be 1 (broadcast) or B = {}", m.batch, p.batch));
  }
  if (m.heads != 1 && m.heads != p.heads_q) {
    fail("mask.heads", fmt::format("H_m = {} must be 1 (broadcast) or H_q = {}", m.heads, p.heads_q));
  }
  const Device d = detail::check_mask_structure(m);
  if (d != q_device) {
    fail("mask", fmt::format("is on {} but q is on {} (the mask must be on the device of q)", device_name(d),
                             device_name(q_device)));
  }
}

/// Bytes [lo, hi] (inclusive) that a view can touch: from its data pointer to the element at the largest offset
/// (positive strides are checked before), plus that element's size. Saturates at the top of the address space.
struct ByteExtent {
  std::uintptr_t lo = 0, hi = 0;
};

ByteExtent byte_extent(const TensorView& t) {
  const auto size = static_cast<std::uint64_t>(dtype_size(t.dtype));
  const std::optional<std::int64_t> last = max_element_offset(t);
  ByteExtent e;
  e.lo = reinterpret_cast<std::uintptr_t>(t.data);
  std::uint64_t bytes = 0;
  if (!last || __builtin_mul_overflow(static_cast<std::uint64_t>(*last), size, &bytes) ||
      __builtin_add_overflow(bytes, size - 1, &bytes) || __builtin_add_overflow(e.lo, bytes, &e.hi))
    e.hi = std::numeric_limits<std::uintptr_t>::max();
  return e;
}

/// Rejects an output whose memory may overlap an input's (the kernels write O and LSE while reading Q, K and V).
/// Conservative: two views on one device overlap when their byte extents intersect, even if no element is shared.
void check_no_overlap(const TensorView& out, const std::string& out_name, const TensorView& in,
                      const std::string& in_name) {
  if (out.device != in.device) return;
  const ByteExtent a = byte_extent(out), b = byte_extent(in);
  if (a.lo <= b.hi && b.lo <= a.hi) {
    fail(out_name, fmt::format("memory overlaps {}'s (byte extents from the data pointer, shape, strides and dtype "
                               "size intersect): outputs must not share memory with q, k, v{}",
                               in_name, out_name == "lse" ? " or o" : ""));
  }
}

}  // namespace

ProblemShape validate_request(const AttentionRequest& r, const ValidateOptions& options) {
  check_bnhd(r.q, "q");
  check_bnhd(r.k, "k");
  check_bnhd(r.v, "v");
  check_bnhd(r.o, "o");
  const Device dev = r.q.device;
  check_same_device(r.k, "k", dev);
  check_same_device(r.v, "v", dev);
  check_same_device(r.o, "o", dev);
  check_dtypes(r, options);

  ProblemShape p;
  p.batch = r.q.shape[0];
  p.n_q = r.q.shape[1];
  p.heads_q = r.q.shape[2];
  p.head_dim = r.q.shape[3];
  p.n_kv = r.k.shape[1];
  p.heads_kv = r.k.shape[2];
  if (r.k.shape[0] != p.batch) fail("k", fmt::format("batch B = {} differs from q's B = {}", r.k.shape[0], p.batch));
  if (r.k.shape[3] != p.head_dim) {
    fail("k", fmt::format("head_dim D = {} differs from q's D = {}", r.k.shape[3], p.head_dim));
  }
  for (int d = 0; d < 4; ++d) {
    if (r.v.shape[d] != r.k.shape[d]) {
      fail("v", fmt::format("shape {} differs from k's shape {}", shape_string(r.v.shape.data(), 4),
                            shape_string(r.k.shape.data(), 4)));
    }
  }
  if (p.heads_q % p.heads_kv != 0) {
    fail("k",
         fmt::format("H_q = {} is not a multiple of H_kv = {} (GQA needs H_q % H_kv == 0)", p.heads_q, p.heads_kv));
  }
  for (int d = 0; d < 4; ++d) {
    if (r.o.shape[d] != r.q.shape[d]) {
      fail("o", fmt::format("shape {} differs from q's shape {}", shape_string(r.o.shape.data(), 4),
                            shape_string(r.q.shape.data(), 4)));
    }
  }
  check_head_dim(p.head_dim, options);
  check_geometry(r.geometry);
  p.n_qb = num_blocks(p.n_q, r.geometry.block_q);
  p.n_kvb = num_blocks(p.n_kv, r.geometry.block_kv);
  check_lse(r.lse, p, dev, options.allow_reference_dtypes);
  check_no_overlap(r.o, "o", r.q, "q");
  check_no_overlap(r.o, "o", r.k, "k");
  check_no_overlap(r.o, "o", r.v, "v");
  if (!r.lse.empty()) {
    check_no_overlap(r.lse, "lse", r.q, "q");
    check_no_overlap(r.lse, "lse", r.k, "k");
    check_no_overlap(r.lse, "lse", r.v, "v");
    check_no_overlap(r.lse, "lse", r.o, "o");
  }
  check_mask_against_request(r.mask, p, r.geometry, dev);
  if (options.check_host_mask_contents && dev == Device::kCpu) detail::check_mask_contents_host(r.mask);
  return p;
}

}  // namespace tessera
