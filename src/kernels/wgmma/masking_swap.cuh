#pragma once
// Score masking of one KV tile in the swapped consumer (consumer_swap.cuh), on the transposed score tile S^T: the
// same rules as TileMask (masking.cuh: membership bits, empty packed slots, kv tokens past N_kv), with kv as rows
// and queries as columns.
//
// Accumulator layout of S^T (m64nT_Qk16, ptx/wgmma.cuh): warp w, lane l (g = l / 4, t = l % 4) holds kv rows
// 16 w + g and 16 w + g + 8 of the tile (h = 0, 1) and query columns 8 i + 2 t + k (i < T_Q / 8, k = 0, 1), at
// s[4 i + 2 h + k]. Per item (init): the kv sub-block (span) or slot (packed) of the thread's two rows and the query
// sub-block of each of its T_Q / 4 columns. Per tile: the entry's metadata (load_members), one warp vote for fully
// active tiles, else one shift-and-test per column and row; only a ragged tile tests its rows against N_kv.
#include <cstdint>

#include "kernels/wgmma/masking.cuh"

namespace tessera::kernels::wgmma {

template <class Cfg, KvVariant V>
struct SwapTileMask {
  static constexpr bool kPacked = V == KvVariant::kPacked;
  int kv_row[2];            // the thread's two tile kv rows
  int kj[2];                // their kv sub-block (span) or slot (packed)
  std::uint32_t qi_of = 0;  // 4 bits per column ci = 2 i + k: its query sub-block (0 unless Coarsened-Q)
  std::uint64_t full = 0;   // the membership bits of every (qi, kj) pair the tile has
  int sub_kv = 0;           // tokens per kv sub-block (span) or per slot (B_KV, packed)

  __device__ __forceinline__ void init(const AttentionParams& p, int warp, int lane) {
    const int sub_q = min(p.block_q, Cfg::TQ);
#pragma unroll
    for (int ci = 0; ci < Cfg::kCols; ++ci)
      qi_of |= std::uint32_t((8 * (ci / 2) + 2 * (lane & 3) + (ci & 1)) / sub_q) << (4 * ci);
    sub_kv = kPacked ? p.block_kv : min(p.block_kv, Cfg::TKV);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      kv_row[h] = 16 * warp + lane / 4 + 8 * h;
      kj[h] = kv_row[h] / sub_kv;
    }
    const int n_kv = kPacked ? p.meta.c_kv_gather : Cfg::TKV / sub_kv;
    for (int i = 0; i < Cfg::TQ / sub_q; ++i) full |= ((1ull << n_kv) - 1) << (8 * i);
  }

  /// Masks the transposed scores s of entry e in place.
  __device__ __forceinline__ void apply(float (&s)[Cfg::TQ / 2], const AttentionParams& p, std::int64_t e) const {
    const TileMembers tm = load_members<Cfg, V>(p, e);
    const bool members_full = (tm.bits & full) == full;
    if (__all_sync(0xffffffffu, members_full && tm.ragged_kj < 0)) return;
    if (!__all_sync(0xffffffffu, members_full)) {
#pragma unroll
      for (int ci = 0; ci < Cfg::kCols; ++ci) {
        const int qi = static_cast<int>(qi_of >> (4 * ci)) & 15;
        const std::uint32_t k = static_cast<std::uint32_t>(tm.bits >> (8 * qi)) & 0xffu;
        const int idx = 4 * (ci / 2) + (ci & 1);
#pragma unroll
        for (int h = 0; h < 2; ++h)
          if (!((k >> kj[h]) & 1u)) s[idx + 2 * h] = -INFINITY;
      }
    }
    if (!__all_sync(0xffffffffu, tm.ragged_kj < 0)) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        // span: ragged_kj = 0 and the row's offset from the tile start; packed: the offset inside its slot
        const bool cut = kPacked ? (kj[h] == tm.ragged_kj && kv_row[h] - kj[h] * sub_kv >= tm.ragged_len)
                                 : kv_row[h] >= tm.ragged_len;
        if (cut) {
#pragma unroll
          for (int i = 0; i < Cfg::TQ / 8; ++i) s[4 * i + 2 * h] = s[4 * i + 2 * h + 1] = -INFINITY;
        }
      }
    }
  }
};

}  // namespace tessera::kernels::wgmma
