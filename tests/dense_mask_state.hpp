#pragma once
// Test helper: a dense logical block mask held as bytes, and its canonical block-CSR state mu(M) built directly
// (without build_mask_state_cpu, so reference tests do not depend on it). Statistics are left at their defaults.
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "tessera/mask_state.hpp"

namespace tessera::testing {

/// Dense block mask [B_m, H_m, n_qb, n_kvb], row-major, 1 = active.
struct DenseBlockMask {
  MaskShape shape;
  std::vector<std::uint8_t> bits;

  explicit DenseBlockMask(MaskShape s = {}) : shape(s), bits(static_cast<std::size_t>(s.total_blocks()), 0) {}
  std::size_t index(std::int64_t bm, std::int64_t hm, std::int64_t qb, std::int64_t kb) const {
    return static_cast<std::size_t>(((bm * shape.heads + hm) * shape.n_qb + qb) * shape.n_kvb + kb);
  }
  bool at(std::int64_t bm, std::int64_t hm, std::int64_t qb, std::int64_t kb) const {
    return bits[index(bm, hm, qb, kb)] != 0;
  }
  void set(std::int64_t bm, std::int64_t hm, std::int64_t qb, std::int64_t kb, bool active) {
    bits[index(bm, hm, qb, kb)] = active ? 1 : 0;
  }
  /// Every block active.
  static DenseBlockMask full(MaskShape s) {
    DenseBlockMask m(s);
    std::fill(m.bits.begin(), m.bits.end(), std::uint8_t{1});
    return m;
  }
  /// Each block active with probability `density`; then each row is emptied with probability `empty_rows`.
  static DenseBlockMask random(MaskShape s, double density, double empty_rows, std::uint64_t seed) {
    DenseBlockMask m(s);
    std::mt19937_64 g(seed);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (auto& b : m.bits) b = u(g) < density ? 1 : 0;
    for (std::int64_t row = 0; row < s.rows(); ++row)
      if (u(g) < empty_rows)
        for (std::int64_t kb = 0; kb < s.n_kvb; ++kb) m.bits[static_cast<std::size_t>(row * s.n_kvb + kb)] = 0;
    return m;
  }
};

/// Canonical block-CSR of a dense mask: rows (b_m * H_m + h_m) * n_qb + qb, columns ascending.
inline HostMaskState dense_mask_state(const DenseBlockMask& m) {
  HostMaskState st;
  st.shape = m.shape;
  st.row_offsets.reserve(static_cast<std::size_t>(m.shape.rows() + 1));
  st.row_offsets.push_back(0);
  for (std::int64_t row = 0; row < m.shape.rows(); ++row) {
    for (std::int64_t kb = 0; kb < m.shape.n_kvb; ++kb)
      if (m.bits[static_cast<std::size_t>(row * m.shape.n_kvb + kb)]) st.col_indices.push_back(static_cast<std::int32_t>(kb));
    st.row_offsets.push_back(static_cast<std::int32_t>(st.col_indices.size()));
  }
  return st;
}

}  // namespace tessera::testing
