#pragma once
// Test helpers for attention: logical [B, S, H, D] tensors stored in BSHD or BHSD order (with optional padding
// tokens and padding head-dim columns, poisoned with NaN, so that reads or writes outside the view are caught),
// random attention cases (shapes, geometry, GQA, broadcast masks, layouts) and output comparison.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "dense_mask_state.hpp"
#include "host_tensor.hpp"
#include "tessera/reference.hpp"
#include "tessera/request.hpp"

namespace tessera::testing {

/// Seed for one random case: a fresh value on every call (from std::random_device, or from the sequence started
/// by the environment variable TESSERA_TEST_SEED to reproduce a run). Print it with SCOPED_TRACE.
inline std::uint64_t fresh_seed() {
  static std::mt19937_64 gen = [] {
    if (const char* s = std::getenv("TESSERA_TEST_SEED")) return std::mt19937_64(std::strtoull(s, nullptr, 10));
    std::random_device rd;
    return std::mt19937_64((static_cast<std::uint64_t>(rd()) << 32) ^ rd());
  }();
  return gen();
}

/// Memory order of a logical [B, S, H, D] tensor.
enum class Layout { kBshd, kBhsd };

inline const char* layout_name(Layout l) { return l == Layout::kBshd ? "BSHD" : "BHSD"; }

/// A logical [B, S, H, D] tensor in host memory, stored in `layout` order with `s_pad` extra tokens and `d_pad`
/// extra head-dim columns per row. Padding is NaN and lies outside the view.
struct AttentionTensor {
  Layout layout = Layout::kBshd;
  std::int64_t B = 0, S = 0, H = 0, D = 0, s_pad = 0, d_pad = 0;
  HostTensor storage;

  AttentionTensor() = default;
  AttentionTensor(DType dtype, Layout l, std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d,
                  std::int64_t spad = 0, std::int64_t dpad = 0)
      : layout(l), B(b), S(s), H(h), D(d), s_pad(spad), d_pad(dpad) {
    storage = l == Layout::kBshd ? HostTensor(dtype, {b, s + spad, h, d + dpad}) : HostTensor(dtype, {b, h, s + spad, d + dpad});
    storage.poison();
  }
  DType dtype() const { return storage.dtype; }
  std::array<std::int64_t, 4> strides() const {
    const std::int64_t row = D + d_pad;
    if (layout == Layout::kBshd) return {(S + s_pad) * H * row, H * row, row, 1};
    return {H * (S + s_pad) * row, row, (S + s_pad) * row, 1};
  }
  std::int64_t offset(std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d) const {
    const auto st = strides();
    return b * st[0] + s * st[1] + h * st[2] + d;
  }
  /// View of logical shape [B, S, H, D] over `data` (this storage, or a device copy of it).
  TensorView view_at(void* data, Device device) const {
    const auto st = strides();
    TensorView t = make_strided_tensor(data, dtype(), device, {B, S, H, D}, {st[0], st[1], st[2], st[3]});
    return t;
  }
  TensorView view() { return view_at(storage.data(), Device::kCpu); }
  double get(std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d) const {
    return storage.get(offset(b, s, h, d));
  }
  void set(std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d, double x) {
    storage.set(offset(b, s, h, d), x);
  }
  /// N(0, 1) values in the view (rounded to the dtype); padding stays NaN.
  void fill_normal(std::uint64_t seed) {
    std::mt19937_64 g(seed);
    std::normal_distribution<double> n(0.0, 1.0);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t s = 0; s < S; ++s)
        for (std::int64_t h = 0; h < H; ++h)
          for (std::int64_t d = 0; d < D; ++d) set(b, s, h, d, n(g));
  }
  /// Copies the logical values of `other` (same logical shape, any layout/dtype: values are rounded to this dtype).
  void copy_values_from(const AttentionTensor& other) {
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t s = 0; s < S; ++s)
        for (std::int64_t h = 0; h < H; ++h)
          for (std::int64_t d = 0; d < D; ++d) set(b, s, h, d, other.get(b, s, h, d));
  }
  /// Logical contents as a contiguous [B, S, H, D] vector of doubles.
  std::vector<double> values() const {
    std::vector<double> out;
    out.reserve(static_cast<std::size_t>(B * S * H * D));
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t s = 0; s < S; ++s)
        for (std::int64_t h = 0; h < H; ++h)
          for (std::int64_t d = 0; d < D; ++d) out.push_back(get(b, s, h, d));
    return out;
  }
  /// Number of storage elements outside the view that are not NaN (0 when nothing was written there).
  std::int64_t padding_written() const {
    std::vector<char> in_view(static_cast<std::size_t>(storage.numel()), 0);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t s = 0; s < S; ++s)
        for (std::int64_t h = 0; h < H; ++h)
          for (std::int64_t d = 0; d < D; ++d) in_view[static_cast<std::size_t>(offset(b, s, h, d))] = 1;
    std::int64_t n = 0;
    for (std::int64_t i = 0; i < storage.numel(); ++i)
      if (!in_view[static_cast<std::size_t>(i)] && !std::isnan(storage.get(i))) ++n;
    return n;
  }
};

/// Parameters of one attention case.
struct CaseConfig {
  std::int64_t B = 1, n_q = 16, n_kv = 16, heads_q = 1, heads_kv = 1, head_dim = 16;
  int block_q = 16, block_kv = 16;
  std::int64_t mask_batch = 1, mask_heads = 1;
  Layout layout_q = Layout::kBshd, layout_k = Layout::kBshd, layout_v = Layout::kBshd;
  std::int64_t s_pad = 0;  ///< extra NaN tokens past N in every input's storage
  DType dtype = DType::kFloat32;
  double density = 0.5, empty_rows = 0.0;
  std::optional<float> scale;

  std::string describe() const {
    return "B=" + std::to_string(B) + " N_q=" + std::to_string(n_q) + " N_kv=" + std::to_string(n_kv) +
           " H_q=" + std::to_string(heads_q) + " H_kv=" + std::to_string(heads_kv) + " D=" + std::to_string(head_dim) +
           " B_Q=" + std::to_string(block_q) + " B_KV=" + std::to_string(block_kv) + " B_m=" + std::to_string(mask_batch) +
           " H_m=" + std::to_string(mask_heads) + " q/k/v=" + layout_name(layout_q) + "/" + layout_name(layout_k) + "/" +
           layout_name(layout_v) + " s_pad=" + std::to_string(s_pad) + " dtype=" + std::string(dtype_name(dtype)) +
           " density=" + std::to_string(density) + " empty_rows=" + std::to_string(empty_rows) +
           (scale ? " scale=" + std::to_string(*scale) : std::string());
  }
  MaskShape mask_shape() const {
    return {mask_batch, mask_heads, num_blocks(n_q, block_q), num_blocks(n_kv, block_kv)};
  }
};

/// A random small configuration. `dtypes` lists the input dtypes to draw from; `max_tokens` bounds N_q and N_kv.
inline CaseConfig random_config(std::mt19937_64& g, const std::vector<DType>& dtypes, std::int64_t max_tokens,
                                const std::vector<std::int64_t>& head_dims) {
  auto pick = [&](auto const& v) { return v[std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(g)]; };
  auto uni = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(g); };
  CaseConfig c;
  c.B = uni(1, 2);
  c.heads_kv = uni(1, 2);
  c.heads_q = c.heads_kv * pick(std::vector<std::int64_t>{1, 2, 4});
  c.head_dim = pick(head_dims);
  c.block_q = static_cast<int>(pick(std::vector<std::int64_t>{16, 32, 48, 64}));
  c.block_kv = static_cast<int>(pick(std::vector<std::int64_t>{16, 32, 48, 64}));
  c.n_q = uni(1, max_tokens);
  c.n_kv = uni(1, max_tokens);
  c.mask_batch = uni(0, 1) ? c.B : 1;
  c.mask_heads = uni(0, 1) ? c.heads_q : 1;
  c.layout_q = uni(0, 1) ? Layout::kBshd : Layout::kBhsd;
  c.layout_k = uni(0, 1) ? Layout::kBshd : Layout::kBhsd;
  c.layout_v = uni(0, 1) ? Layout::kBshd : Layout::kBhsd;
  c.s_pad = uni(0, 2);
  c.dtype = pick(dtypes);
  c.density = std::uniform_real_distribution<double>(0.05, 1.0)(g);
  c.empty_rows = uni(0, 2) == 0 ? 0.0 : 0.25;
  // Explicit scales keep scores O(1) (between 0.25x and 2x the default): fp32 score errors grow with |scores|.
  if (uni(0, 3) == 0)
    c.scale = static_cast<float>(std::uniform_real_distribution<double>(0.25, 2.0)(g) /
                                 std::sqrt(static_cast<double>(c.head_dim)));
  return c;
}

/// Inputs of one case in host memory, with its mask (dense and as canonical block-CSR).
struct AttentionCase {
  CaseConfig cfg;
  AttentionTensor q, k, v;
  DenseBlockMask mask;
  HostMaskState state;

  AttentionCase(const CaseConfig& c, std::uint64_t seed) : cfg(c) {
    q = AttentionTensor(c.dtype, c.layout_q, c.B, c.n_q, c.heads_q, c.head_dim, c.s_pad);
    k = AttentionTensor(c.dtype, c.layout_k, c.B, c.n_kv, c.heads_kv, c.head_dim, c.s_pad);
    v = AttentionTensor(c.dtype, c.layout_v, c.B, c.n_kv, c.heads_kv, c.head_dim, c.s_pad);
    q.fill_normal(seed * 4 + 1);
    k.fill_normal(seed * 4 + 2);
    v.fill_normal(seed * 4 + 3);
    set_mask(DenseBlockMask::random(c.mask_shape(), c.density, c.empty_rows, seed * 4 + 4));
  }
  void set_mask(const DenseBlockMask& m) {
    mask = m;
    state = dense_mask_state(mask);
  }
  /// Request over the host tensors; request.mask is the block-CSR view of `state`; o and lse are left empty.
  AttentionRequest request() {
    AttentionRequest r;
    r.q = q.view();
    r.k = k.view();
    r.v = v.view();
    r.geometry = {cfg.block_q, cfg.block_kv};
    r.scale = cfg.scale;
    const auto nnz = static_cast<std::int64_t>(state.col_indices.size());
    r.mask = BlockMask::from_block_csr(
        make_tensor(state.row_offsets.data(), DType::kInt32, Device::kCpu, {state.shape.rows() + 1}),
        make_tensor(state.col_indices.data(), DType::kInt32, Device::kCpu, {nnz}), state.shape.batch,
        state.shape.heads, state.shape.n_qb, state.shape.n_kvb);
    return r;
  }
};

/// Expects `lse` to have -inf exactly where `ref` has it, no NaN, and the finite values within `tol` relative L2.
inline void expect_lse_close(const std::vector<double>& lse, const std::vector<double>& ref, double tol) {
  ASSERT_EQ(lse.size(), ref.size());
  std::vector<double> a, b;
  std::int64_t mismatched = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    ASSERT_FALSE(std::isnan(lse[i])) << "LSE NaN at " << i;
    const bool ref_empty = std::isinf(ref[i]) && ref[i] < 0;
    const bool got_empty = std::isinf(lse[i]) && lse[i] < 0;
    if (ref_empty != got_empty) ++mismatched;
    if (!ref_empty && !got_empty) {
      a.push_back(lse[i]);
      b.push_back(ref[i]);
    }
  }
  EXPECT_EQ(mismatched, 0) << "rows with -inf LSE differ";
  EXPECT_LE(relative_l2(a.data(), b.data(), static_cast<std::int64_t>(a.size())), tol);
}

/// Expects O within `tol` relative L2 (no NaN) and LSE as expect_lse_close.
inline void expect_output_close(const ReferenceOutput& got, const ReferenceOutput& ref, double tol) {
  ASSERT_EQ(got.o.size(), ref.o.size());
  for (std::size_t i = 0; i < got.o.size(); ++i) ASSERT_FALSE(std::isnan(got.o[i])) << "O NaN at " << i;
  EXPECT_LE(relative_l2(got.o.data(), ref.o.data(), static_cast<std::int64_t>(ref.o.size())), tol);
  expect_lse_close(got.lse, ref.lse, tol);
}

}  // namespace tessera::testing
