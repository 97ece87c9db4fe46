#pragma once
// Test-only host builders of launch metadata (src/core/tile_metadata.hpp) for the kernel tests and benchmarks:
// Direct / Coarsened (span + membership, or packed KV) / Refined mappings and split-KV, built simply and
// directly from a dense block mask. The plan layer's real builders (CPU + GPU) live in src/core and src/cuda.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "core/tile_metadata.hpp"

namespace tessera::testing {

/// Dense per-head block mask: [B][H][n_qb][n_kvb] (uint8, 1 = active).
struct BlockMask {
  int batch = 0, heads = 0, n_qb = 0, n_kvb = 0;
  std::vector<std::uint8_t> bits;
  std::uint8_t at(int b, int h, int qb, int kb) const {
    return bits[((std::size_t(b) * heads + h) * n_qb + qb) * n_kvb + kb];
  }
  std::uint8_t& at(int b, int h, int qb, int kb) { return bits[((std::size_t(b) * heads + h) * n_qb + qb) * n_kvb + kb]; }
};

/// Physical mapping of a plan: tile sizes, KV form, split-KV ways.
struct MappingSpec {
  int tile_q = 64, tile_kv = 64;
  bool packed = false;    ///< KV tiles gather tile_kv / block_kv active logical blocks
  bool membership = true; ///< write member bits (span_masked / packed variants)
  int split = 1;          ///< > 1: each query tile's entries are split into `split` partial work items
};

struct HostPlan {
  std::vector<WorkItem> items;
  std::vector<std::int32_t> kv_tile;
  std::vector<std::uint64_t> member;
  std::vector<std::int32_t> gather;
  int c_kv = 0;
  std::vector<std::int32_t> merge_offsets{0};
  std::vector<WorkItem> merge_targets;
  int n_partials = 0;
  std::int64_t active_pairs = 0;  ///< active (query token, kv token) pairs of the mask (for FLOP counts)
};

/// Builds the metadata of `spec` for mask `m` with logical blocks (bq, bkv) over N_q x N_kv tokens.
inline HostPlan build_plan(const BlockMask& m, int n_q, int n_kv, int bq, int bkv, const MappingSpec& spec) {
  HostPlan p;
  const int tq = spec.tile_q, tkv = spec.tile_kv;
  const int n_qt = (n_q + tq - 1) / tq, n_kvt = (n_kv + tkv - 1) / tkv;
  if (spec.packed) p.c_kv = tkv / bkv;
  int row = 0;
  for (int b = 0; b < m.batch; ++b) {
    for (int h = 0; h < m.heads; ++h) {
      for (int qt = 0; qt < n_qt; ++qt, ++row) {
        const int q_start = qt * tq, q_len = std::min(tq, n_q - q_start);
        // query blocks covered by the tile and their sub-block index qi
        std::vector<std::pair<int, int>> qbs;
        if (tq >= bq) {
          const int cq = tq / bq;
          for (int i = 0; i < cq && qt * cq + i < m.n_qb; ++i) qbs.push_back({qt * cq + i, i});
        } else {
          qbs.push_back({q_start / bq, 0});
        }
        const int e0 = static_cast<int>(spec.packed ? p.gather.size() / std::max(1, p.c_kv) : p.kv_tile.size());
        if (spec.packed) {
          std::vector<int> blocks;
          for (int kb = 0; kb < m.n_kvb; ++kb)
            for (auto [qb, qi] : qbs)
              if (m.at(b, h, qb, kb)) { blocks.push_back(kb); break; }
          for (std::size_t i = 0; i < blocks.size(); i += p.c_kv) {
            std::uint64_t bits = 0;
            for (int j = 0; j < p.c_kv; ++j) {
              const std::size_t k = i + j;
              p.gather.push_back(k < blocks.size() ? blocks[k] : -1);
              if (k < blocks.size())
                for (auto [qb, qi] : qbs)
                  if (m.at(b, h, qb, blocks[k])) bits |= 1ull << (qi * 8 + j);
            }
            p.member.push_back(bits);
          }
        } else if (tkv >= bkv) {
          const int ckv = tkv / bkv;
          for (int t = 0; t < n_kvt; ++t) {
            std::uint64_t bits = 0;
            for (int j = 0; j < ckv && t * ckv + j < m.n_kvb; ++j)
              for (auto [qb, qi] : qbs)
                if (m.at(b, h, qb, t * ckv + j)) bits |= 1ull << (qi * 8 + j);
            if (bits) p.kv_tile.push_back(t), p.member.push_back(bits);
          }
        } else {
          const int r = bkv / tkv;
          for (int kb = 0; kb < m.n_kvb; ++kb) {
            std::uint64_t bits = 0;
            for (auto [qb, qi] : qbs)
              if (m.at(b, h, qb, kb)) bits |= 1ull << (qi * 8);
            if (!bits) continue;
            for (int i = 0; i < r && (kb * r + i) * tkv < n_kv; ++i) p.kv_tile.push_back(kb * r + i), p.member.push_back(bits);
          }
        }
        const int e1 = static_cast<int>(spec.packed ? p.gather.size() / p.c_kv : p.kv_tile.size());
        if (spec.split <= 1) {
          p.items.push_back({b, h, q_start, q_len, e0, e1, row, -1});
        } else {
          const int n = e1 - e0;
          for (int s = 0; s < spec.split; ++s) {
            const int lo = e0 + static_cast<int>(std::int64_t(n) * s / spec.split);
            const int hi = e0 + static_cast<int>(std::int64_t(n) * (s + 1) / spec.split);
            p.items.push_back({b, h, q_start, q_len, lo, hi, row, p.n_partials++});
          }
          p.merge_targets.push_back({b, h, q_start, q_len, e0, e1, row, -1});
          p.merge_offsets.push_back(p.n_partials);
        }
      }
    }
  }
  if (spec.packed) p.kv_tile.assign(p.gather.size() / std::max(1, p.c_kv), 0);
  if (!spec.membership) p.member.clear();
  for (int b = 0; b < m.batch; ++b)
    for (int h = 0; h < m.heads; ++h)
      for (int qb = 0; qb < m.n_qb; ++qb)
        for (int kb = 0; kb < m.n_kvb; ++kb)
          if (m.at(b, h, qb, kb))
            p.active_pairs += std::int64_t(std::min(bq, n_q - qb * bq)) * std::min(bkv, n_kv - kb * bkv);
  return p;
}

/// Mask kinds used by the tests and benchmarks.
enum class MaskKind { kRandom, kBandRandom, kEmptyRows, kDense, kEmpty, kHalves, kTopK };

/// Fills a block mask. Random: density d; BandRandom: a diagonal band holding about a third of each row's
/// active blocks plus uniform random blocks up to density d (h200_baselines.md recipe); EmptyRows: random with
/// every third query block row empty; Dense: all ones; Empty: all zeros; Halves: even query block rows hold the
/// first half of the kv blocks, odd rows the second half, and every row kv blocks 3, 10, 17, ... (kb % 7 == 3): two
/// neighbouring rows share few blocks, in long runs of one row's blocks (d unused); TopK: per row the top
/// round(d * n_kvb) blocks of a distance-decaying noisy score field, -|c - kb| / w + 0.5 N(0, 1) with c the row's
/// diagonal and w in [5, 45) per head (bench/peers/workloads.py's topk_score_field, the VSA-like Wan workload):
/// neighbouring rows share most of their blocks.
inline BlockMask make_mask(int batch, int heads, int n_qb, int n_kvb, MaskKind kind, double d, std::uint64_t seed) {
  BlockMask m{batch, heads, n_qb, n_kvb, std::vector<std::uint8_t>(std::size_t(batch) * heads * n_qb * n_kvb, 0)};
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  auto rnd = [&s]() {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return double(s >> 11) * (1.0 / 9007199254740992.0);
  };
  auto normal = [&rnd]() {  // Box-Muller; the two draws sequenced, so every compiler makes the same masks
    const double u1 = rnd(), u2 = rnd();
    return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(6.283185307179586 * u2);
  };
  std::vector<std::pair<double, int>> scores(static_cast<std::size_t>(n_kvb));
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h) {
      const double width = kind == MaskKind::kTopK ? 5.0 + 40.0 * rnd() : 0.0;  // other kinds draw nothing here
      for (int qb = 0; qb < n_qb; ++qb) {
        const int target = std::max(1, static_cast<int>(std::lround(d * n_kvb)));
        if (kind == MaskKind::kDense) {
          for (int kb = 0; kb < n_kvb; ++kb) m.at(b, h, qb, kb) = 1;
        } else if (kind == MaskKind::kEmpty) {
        } else if (kind == MaskKind::kTopK) {
          const double center = double(std::int64_t(qb) * n_kvb / n_qb);
          for (int kb = 0; kb < n_kvb; ++kb) scores[kb] = {std::abs(center - kb) / width - 0.5 * normal(), kb};
          const int k = std::min(target, n_kvb);
          std::nth_element(scores.begin(), scores.begin() + (k - 1), scores.end());
          for (int i = 0; i < k; ++i) m.at(b, h, qb, scores[i].second) = 1;
        } else if (kind == MaskKind::kHalves) {
          for (int kb = 0; kb < n_kvb; ++kb) m.at(b, h, qb, kb) = ((2 * kb < n_kvb) == (qb % 2 == 0)) || kb % 7 == 3;
        } else if (kind == MaskKind::kBandRandom) {
          const int band = std::max(1, target / 3);
          const int center = static_cast<int>(std::int64_t(qb) * n_kvb / n_qb);
          const int lo = std::clamp(center - band / 2, 0, std::max(0, n_kvb - band));
          for (int kb = lo; kb < std::min(n_kvb, lo + band); ++kb) m.at(b, h, qb, kb) = 1;
          int have = std::min(band, n_kvb);
          while (have < std::min(target, n_kvb)) {
            const int kb = std::min(n_kvb - 1, static_cast<int>(rnd() * n_kvb));
            if (!m.at(b, h, qb, kb)) m.at(b, h, qb, kb) = 1, ++have;
          }
        } else {
          if (kind == MaskKind::kEmptyRows && qb % 3 == 1) continue;
          for (int kb = 0; kb < n_kvb; ++kb) m.at(b, h, qb, kb) = rnd() < d ? 1 : 0;
        }
      }
    }
  return m;
}

}  // namespace tessera::testing
