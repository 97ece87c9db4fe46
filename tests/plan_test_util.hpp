#pragma once
// Test helpers for the plan layer: HostMaskState from dense block masks, mask kinds, brute-force float64 attention.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "tessera/mask_state.hpp"

namespace tessera::plan_testing {

/// A dense block mask [B_m, H_m, n_qb, n_kvb], one byte per block.
struct DenseBlockMask {
  std::int64_t batch = 1, heads = 1, n_qb = 0, n_kvb = 0;
  std::vector<std::uint8_t> bits;
  DenseBlockMask() = default;
  DenseBlockMask(std::int64_t b, std::int64_t h, std::int64_t q, std::int64_t k)
      : batch(b), heads(h), n_qb(q), n_kvb(k), bits(static_cast<std::size_t>(b * h * q * k), 0) {}
  std::uint8_t& at(std::int64_t b, std::int64_t h, std::int64_t qb, std::int64_t kb) {
    return bits[static_cast<std::size_t>(((b * heads + h) * n_qb + qb) * n_kvb + kb)];
  }
  std::uint8_t at(std::int64_t b, std::int64_t h, std::int64_t qb, std::int64_t kb) const {
    return bits[static_cast<std::size_t>(((b * heads + h) * n_qb + qb) * n_kvb + kb)];
  }
};

/// mu(M) (block-CSR only; statistics left default) from a dense block mask. Independent of the masks helper's
/// builders on purpose.
inline HostMaskState host_mask_state(const DenseBlockMask& m) {
  HostMaskState s;
  s.shape = MaskShape{m.batch, m.heads, m.n_qb, m.n_kvb};
  s.row_offsets.push_back(0);
  for (std::int64_t r = 0; r < m.batch * m.heads * m.n_qb; ++r) {
    for (std::int64_t c = 0; c < m.n_kvb; ++c) {
      if (m.bits[static_cast<std::size_t>(r * m.n_kvb + c)]) s.col_indices.push_back(static_cast<std::int32_t>(c));
    }
    s.row_offsets.push_back(static_cast<std::int32_t>(s.col_indices.size()));
  }
  s.stats.shape = s.shape;
  s.stats.counters.active_blocks = static_cast<std::int64_t>(s.col_indices.size());
  return s;
}

/// Random mask with independent blocks active with probability `density`.
inline DenseBlockMask random_mask(std::int64_t b, std::int64_t h, std::int64_t q, std::int64_t k, double density,
                                  std::uint64_t seed) {
  DenseBlockMask m(b, h, q, k);
  std::mt19937_64 g(seed);
  std::bernoulli_distribution d(density);
  for (auto& x : m.bits) x = d(g) ? 1 : 0;
  return m;
}

/// Brute-force E(M) in float64 (DESIGN.md section 1) on contiguous [B, N, H, D] double arrays.
/// O [B, N_q, H_q, D], LSE [B, H_q, N_q].
inline void dense_attention_f64(const DenseBlockMask& m, std::int64_t B, std::int64_t Hq, std::int64_t Hkv,
                                std::int64_t Nq, std::int64_t Nkv, std::int64_t D, std::int64_t block_q,
                                std::int64_t block_kv, const std::vector<double>& q, const std::vector<double>& k,
                                const std::vector<double>& v, double scale, std::vector<double>& o,
                                std::vector<double>& lse) {
  o.assign(static_cast<std::size_t>(B * Nq * Hq * D), 0.0);
  lse.assign(static_cast<std::size_t>(B * Hq * Nq), -std::numeric_limits<double>::infinity());
  std::vector<double> s(static_cast<std::size_t>(Nkv));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < Hq; ++h) {
      const std::int64_t hk = h / (Hq / Hkv);
      const std::int64_t bm = m.batch == 1 ? 0 : b, hm = m.heads == 1 ? 0 : h;
      for (std::int64_t i = 0; i < Nq; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j < Nkv; ++j) {
          if (!m.at(bm, hm, i / block_q, j / block_kv)) continue;
          double acc = 0;
          for (std::int64_t d = 0; d < D; ++d) acc += q[((b * Nq + i) * Hq + h) * D + d] * k[((b * Nkv + j) * Hkv + hk) * D + d];
          s[j] = acc * scale;
          mx = std::max(mx, s[j]);
        }
        if (mx == -std::numeric_limits<double>::infinity()) continue;
        double l = 0;
        double* orow = &o[((b * Nq + i) * Hq + h) * D];
        for (std::int64_t j = 0; j < Nkv; ++j) {
          if (!m.at(bm, hm, i / block_q, j / block_kv)) continue;
          const double p = std::exp(s[j] - mx);
          l += p;
          for (std::int64_t d = 0; d < D; ++d) orow[d] += p * v[((b * Nkv + j) * Hkv + hk) * D + d];
        }
        for (std::int64_t d = 0; d < D; ++d) orow[d] /= l;
        lse[(b * Hq + h) * Nq + i] = mx + std::log(l);
      }
    }
}

}  // namespace tessera::plan_testing
