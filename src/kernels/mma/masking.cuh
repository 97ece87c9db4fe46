#pragma once
// Score masking of one tile: membership bits (Coarsened plans), empty packed slots, ragged tails.
// Masked scores become -inf before the online-softmax update. The decision whether a tile needs any masking
// is uniform over the CTA, so unmasked tiles pay one comparison.
#include <cstdint>

#include "kernels/mma/config.cuh"

namespace tessera::kernels::mma {

/// Per-thread, per-work-item constants of the membership layout.
template <class Cfg>
struct MaskLayout {
  int qi[Cfg::MT][2];     // query sub-block of each of the thread's rows
  int w8;                 // n8 score tiles per kv sub-block
  std::uint64_t full;     // every (qi, kj) pair that exists in the tile
  /// sub_q, sub_kv: tokens per membership sub-block (min(B, T) on span dimensions, B_KV when packed).
  __device__ __forceinline__ void init(int row0, int lane, int sub_q, int sub_kv) {
#pragma unroll
    for (int m = 0; m < Cfg::MT; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) qi[m][h] = (row0 + m * 16 + (lane >> 2) + 8 * h) / sub_q;
    w8 = sub_kv / 8;
    const int n_q = Cfg::TQ / sub_q, n_kv = Cfg::TKV / sub_kv;
    const std::uint64_t row_bits = (1ull << n_kv) - 1;
    full = 0;
    for (int i = 0; i < n_q; ++i) full |= row_bits << (8 * i);
  }
  /// Bit n set when score n8-tile n lies in a kv sub-block whose bit is set in `kbits`.
  __device__ __forceinline__ std::uint32_t expand(std::uint32_t kbits) const {
    std::uint32_t allow = 0;
#pragma unroll
    for (int kj = 0; kj < 8; ++kj) {
      if ((kbits >> kj) & 1u) {
        const int lo = kj * w8, hi = lo + w8;
        if (lo < Cfg::NT) allow |= ((hi >= 32 ? 0xffffffffu : (1u << hi) - 1u)) & ~((1u << lo) - 1u);
      }
    }
    return allow;
  }
};

/// Masks s in place. mb: membership bits of the entry (all ones when none); kv_limit: valid columns of a span
/// tile (TKV when not ragged); slot_cnt: valid tokens of each packed slot (shared memory) or null (span);
/// block_kv: B_KV (packed); ragged_slots: some packed slot is partially valid.
template <class Cfg>
__device__ __forceinline__ void apply_mask(float (&s)[Cfg::MT][Cfg::NT][4], const MaskLayout<Cfg>& ml,
                                           std::uint64_t mb, int kv_limit, const int* slot_cnt, int block_kv,
                                           bool ragged_slots, int lane) {
  const int t2 = 2 * (lane & 3);
#pragma unroll
  for (int m = 0; m < Cfg::MT; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const std::uint32_t allow = ml.expand(static_cast<std::uint32_t>(mb >> (8 * ml.qi[m][h])) & 0xffu);
#pragma unroll
      for (int n = 0; n < Cfg::NT; ++n) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int col = n * 8 + t2 + j;
          bool ok = ((allow >> n) & 1u) && col < kv_limit;
          if (ragged_slots) {
            const int slot = col / block_kv;
            ok = ok && (col - slot * block_kv) < slot_cnt[slot];
          }
          if (!ok) s[m][n][2 * h + j] = -INFINITY;
        }
      }
    }
  }
}

}  // namespace tessera::kernels::mma
