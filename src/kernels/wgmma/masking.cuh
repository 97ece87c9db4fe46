#pragma once
// Score masking of one KV tile in a consumer warpgroup: membership bits (Coarsened plans, packed slots), empty
// packed slots and ragged tails (kv tokens past N_kv, which TMA zero-filled: a zero K row scores 0, not -inf).
// Masked scores become -inf before the online-softmax update.
//
// Cost. Everything that depends only on the work item is computed once (TileMask::init): the query sub-block of
// each of the thread's two rows, and for each n8 column tile of the score tile its kv sub-block (span) or slot
// (packed), packed 4 bits per tile. Per KV tile the mask then costs the entry's metadata loads, one uniform test
// (a warp vote, which the compiler knows to be uniform, so no wgmma is serialized) and, for a tile that is not
// fully active, one shift-and-test per n8 tile and row; only a ragged tile (the sequence's last) compares columns.
//
// Accumulator layout (ptx/wgmma.cuh): the thread holds rows row0 (its warpgroup's first tile row + 16 * warp +
// lane / 4) and row0 + 8, columns 8 i + 2 (lane % 4) + {0, 1} of n8 tile i.
#include <cstdint>

#include "core/tile_metadata.hpp"
#include "kernels/launch.hpp"

namespace tessera::kernels::wgmma {

/// What masking needs of entry e's metadata: its membership bits (bit qi * 8 + kj; all ones without membership),
/// with empty packed slots cleared, and the kv sub-block (span: 0, the tile) or slot cut by N_kv with its valid
/// tokens (ragged_kj = -1 when no part of the tile lies past N_kv). Shared by TileMask and SwapTileMask.
struct TileMembers {
  std::uint64_t bits;
  int ragged_kj, ragged_len;
};

template <class Cfg, KvVariant V>
__device__ __forceinline__ TileMembers load_members(const AttentionParams& p, std::int64_t e) {
  std::uint64_t mb = ~0ull;
  if (V != KvVariant::kSpan && p.meta.member != nullptr) mb = member_bits(p.meta.member, p.meta.member_bytes, e);
  int ragged_kj = -1, ragged_len = 0;
  if constexpr (V == KvVariant::kPacked) {
    const int c = p.meta.c_kv_gather, bkv = p.block_kv;
    std::uint32_t valid = 0;
    for (int j = 0; j < c; ++j) {
      const int g = __ldg(p.meta.gather_blocks + e * c + j);
      if (g >= 0) {
        valid |= 1u << j;
        if ((g + 1) * bkv > p.n_kv) ragged_kj = j, ragged_len = p.n_kv - g * bkv;
      }
    }
    mb &= std::uint64_t(valid) * 0x0101010101010101ull;
  } else if (p.n_kv % Cfg::TKV != 0) {  // else no span tile can reach past N_kv: no load
    const int kv_limit = p.n_kv - __ldg(p.meta.kv_tile + e) * Cfg::TKV;
    if (kv_limit < Cfg::TKV) ragged_kj = 0, ragged_len = kv_limit;  // columns >= kv_limit of the tile
  }
  return TileMembers{mb, ragged_kj, ragged_len};
}

template <class Cfg, KvVariant V>
struct TileMask {
  static constexpr bool kPacked = V == KvVariant::kPacked;
  static constexpr int kTiles = Cfg::TKV / 8;  // n8 column tiles
  int qi[2];                // query sub-block of the thread's rows (0 unless the query dimension is coarsened)
  std::uint64_t kj_of = 0;  // 4 bits per n8 tile: its kv sub-block (span) or slot (packed)
  std::uint64_t full = 0;   // the membership bits of every (qi, kj) pair the tile has
  std::uint64_t own = 0;    // the membership bits of the pairs whose query sub-block lies in this warpgroup's rows
  int sub_kv = 0;           // tokens per kv sub-block (span) or per slot (B_KV, packed)

  /// row0: the thread's first tile row; wg: its consumer warpgroup (rows 64 wg .. 64 wg + 63 of the tile).
  __device__ __forceinline__ void init(const AttentionParams& p, int row0, int wg) {
    const int sub_q = min(p.block_q, Cfg::TQ);
    qi[0] = row0 / sub_q;
    qi[1] = (row0 + 8) / sub_q;
    sub_kv = kPacked ? p.block_kv : min(p.block_kv, Cfg::TKV);
#pragma unroll
    for (int i = 0; i < kTiles; ++i) kj_of |= std::uint64_t((8 * i) / sub_kv) << (4 * i);
    const int n_kv = kPacked ? p.meta.c_kv_gather : Cfg::TKV / sub_kv;
    for (int i = 0; i < Cfg::TQ / sub_q; ++i) {
      const std::uint64_t row_bits = ((1ull << n_kv) - 1) << (8 * i);
      full |= row_bits;
      if (i * sub_q < 64 * (wg + 1) && (i + 1) * sub_q > 64 * wg) own |= row_bits;
    }
  }

  /// Whether any (query sub-block, kv sub-block) pair of entry tm that meets this warpgroup's rows is active. When
  /// none is, every score of the warpgroup would be masked: the tile changes neither m, l nor O, and the consumer
  /// may skip its products (consumer_skip.cuh).
  __device__ __forceinline__ bool touches(const TileMembers& tm) const { return (tm.bits & own) != 0; }

  /// Masks the scores s of entry e in place.
  __device__ __forceinline__ void apply(float (&s)[Cfg::TKV / 2], const AttentionParams& p, std::int64_t e,
                                        int lane) const {
    apply(s, load_members<Cfg, V>(p, e), lane);
  }

  /// Masks the scores s in place, given the entry's members (load_members).
  __device__ __forceinline__ void apply(float (&s)[Cfg::TKV / 2], const TileMembers& tm, int lane) const {
    const std::uint64_t mb = tm.bits;
    const int ragged_kj = tm.ragged_kj, ragged_len = tm.ragged_len;
    const bool members_full = (mb & full) == full;
    if (__all_sync(0xffffffffu, members_full && ragged_kj < 0)) return;
    const int t2 = 2 * (lane & 3);
    if (!__all_sync(0xffffffffu, members_full)) {
      const std::uint32_t k0 = static_cast<std::uint32_t>(mb >> (8 * qi[0])) & 0xffu;
      const std::uint32_t k1 = static_cast<std::uint32_t>(mb >> (8 * qi[1])) & 0xffu;
#pragma unroll
      for (int i = 0; i < kTiles; ++i) {
        const int kj = static_cast<int>(kj_of >> (4 * i)) & 15;
        if (!((k0 >> kj) & 1u)) s[4 * i + 0] = s[4 * i + 1] = -INFINITY;
        if (!((k1 >> kj) & 1u)) s[4 * i + 2] = s[4 * i + 3] = -INFINITY;
      }
    }
    if (!__all_sync(0xffffffffu, ragged_kj < 0)) {
#pragma unroll
      for (int i = 0; i < kTiles; ++i) {
#pragma unroll
        for (int k = 0; k < 2; ++k) {
          const int col = 8 * i + t2 + k;
          const int kj = static_cast<int>(kj_of >> (4 * i)) & 15;
          // span: ragged_kj = 0 and the column's offset from the tile start; packed: the offset inside its slot
          const bool cut = kPacked ? (kj == ragged_kj && col - kj * sub_kv >= ragged_len) : col >= ragged_len;
          if (cut) s[4 * i + k] = s[4 * i + 2 + k] = -INFINITY;
        }
      }
    }
  }
};

}  // namespace tessera::kernels::wgmma
