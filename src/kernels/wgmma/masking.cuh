#pragma once
// Score masking of one KV tile in a consumer warpgroup: membership bits (Coarsened plans, packed slots), empty
// packed slots and ragged tails (kv tokens past N_kv, which TMA zero-filled: a zero K row scores 0, not -inf).
// Masked scores become -inf before the online-softmax update. Whether a tile needs masking at all is decided
// uniformly (every thread reads the same entry metadata; the branch is a warp vote, which the compiler knows to be
// uniform), so a fully active tile costs a few loads and compares.
//
// Accumulator layout (ptx/wgmma.cuh): the thread holds rows row0 (= 16 * warp + lane / 4 of its warpgroup's 64 rows,
// offset by the warpgroup's first tile row) and row0 + 8, columns 8 i + 2 (lane % 4) + {0, 1} of n8 tile i.
#include <cstdint>

#include "core/tile_metadata.hpp"
#include "kernels/launch.hpp"

namespace tessera::kernels::wgmma {

/// Masks the scores s of entry e in place. row0: the tile row of the thread's first row (its second is row0 + 8).
template <class Cfg, KvVariant V>
__device__ __forceinline__ void mask_scores(float (&s)[Cfg::TKV / 2], const AttentionParams& p, std::int64_t e,
                                            int row0, int lane) {
  constexpr bool kPacked = V == KvVariant::kPacked;
  const int t2 = 2 * (lane & 3);
  std::uint64_t mb = ~0ull;
  if (V != KvVariant::kSpan && p.meta.member != nullptr) mb = member_bits(p.meta.member, p.meta.member_bytes, e);
  const int sub_q = min(p.block_q, Cfg::TQ);
  const int q_subs = Cfg::TQ / sub_q;
  if constexpr (kPacked) {
    const int c = p.meta.c_kv_gather, bkv = p.block_kv;
    const std::int32_t* slots = p.meta.gather_blocks + e * c;
    bool full = true;
    for (int j = 0; j < c; ++j) {
      const int g = __ldg(slots + j);
      full = full && g >= 0 && (g + 1) * bkv <= p.n_kv;
    }
    const std::uint64_t row_bits = (1ull << c) - 1;
    for (int i = 0; i < q_subs; ++i) full = full && ((mb >> (8 * i)) & row_bits) == row_bits;
    if (__all_sync(0xffffffffu, full)) return;  // a vote: provably warp-uniform, no serialized wgmma
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int qi = (row0 + 8 * h) / sub_q;
#pragma unroll
      for (int i = 0; i < Cfg::TKV / 8; ++i) {
#pragma unroll
        for (int k = 0; k < 2; ++k) {
          const int col = 8 * i + t2 + k;
          const int slot = col / bkv;
          const int g = __ldg(slots + slot);
          const bool ok = g >= 0 && g * bkv + (col - slot * bkv) < p.n_kv && ((mb >> (8 * qi + slot)) & 1u);
          if (!ok) s[4 * i + 2 * h + k] = -INFINITY;
        }
      }
    }
  } else {
    const int kv_limit = min(Cfg::TKV, p.n_kv - __ldg(p.meta.kv_tile + e) * Cfg::TKV);
    const int sub_kv = min(p.block_kv, Cfg::TKV);
    bool full = kv_limit >= Cfg::TKV;
    if constexpr (V == KvVariant::kSpanMasked) {
      const std::uint64_t row_bits = (1ull << (Cfg::TKV / sub_kv)) - 1;
      for (int i = 0; i < q_subs; ++i) full = full && ((mb >> (8 * i)) & row_bits) == row_bits;
    }
    if (__all_sync(0xffffffffu, full)) return;  // a vote: provably warp-uniform, no serialized wgmma
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int qi = (row0 + 8 * h) / sub_q;
      const std::uint32_t kbits = static_cast<std::uint32_t>(mb >> (8 * qi)) & 0xffu;
#pragma unroll
      for (int i = 0; i < Cfg::TKV / 8; ++i) {
#pragma unroll
        for (int k = 0; k < 2; ++k) {
          const int col = 8 * i + t2 + k;
          const bool ok = col < kv_limit && ((kbits >> (col / sub_kv)) & 1u);
          if (!ok) s[4 * i + 2 * h + k] = -INFINITY;
        }
      }
    }
  }
}

}  // namespace tessera::kernels::wgmma
