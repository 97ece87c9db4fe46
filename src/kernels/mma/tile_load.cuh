#pragma once
// Global -> shared loads of the Q tile and of one K or V tile (span or packed), by cp.async with zero-fill into
// swizzled shared memory. Rows that do not exist (past N, empty packed slots) are zero-filled so that
// P (= 0) * V never meets garbage.
#include "kernels/launch.hpp"
#include "kernels/ptx/cp_async.cuh"
#include "kernels/ptx/swizzle.cuh"

namespace tessera::kernels::mma {

/// Q tile rows [0, q_len) of (b, h) starting at token q_start; rows past q_len are zero.
template <class Cfg>
__device__ __forceinline__ void load_q(std::uint32_t sq, const AttentionParams& p, const WorkItem& it) {
  using T = typename Cfg::Elem;
  const T* base = static_cast<const T*>(p.q) + it.batch * p.q_stride_b + it.head * p.q_stride_h;
  for (int i = threadIdx.x; i < Cfg::TQ * Cfg::kChunks; i += Cfg::kThreads) {
    const int r = i / Cfg::kChunks, c = i % Cfg::kChunks;
    const bool ok = r < it.q_len;
    const T* src = ok ? base + std::int64_t(it.q_start + r) * p.q_stride_n + c * 8 : base;
    ptx::cp_async_16_zfill(sq + ptx::swizzle_offset<Cfg::kChunks>(r, c), src, ok);
  }
}

/// Where the rows of one KV tile come from: a span start token, or the packed slots' logical blocks.
struct KvTileSource {
  int kv0;          ///< span: first token of the tile
  const int* gather;  ///< packed: the slots' logical blocks (global gather_blocks + e * c_kv, or the shared copy)
};

/// Source of entry e. Packed, with slot_blk non-null: thread j < 8 also records slot j's logical block and
/// valid-token count in slot_blk/slot_cnt (int[8], shared memory; read after the next __syncthreads).
template <class Cfg, bool kPacked>
__device__ __forceinline__ KvTileSource kv_source(const AttentionParams& p, std::int64_t e, int* slot_blk,
                                                  int* slot_cnt) {
  KvTileSource src{0, nullptr};
  if constexpr (kPacked) {
    const int c_kv = p.meta.c_kv_gather;
    src.gather = p.meta.gather_blocks + e * c_kv;
    if (slot_blk != nullptr && threadIdx.x < Cfg::kMaxSlots) {
      const int j = threadIdx.x;
      const int blk = j < c_kv ? __ldg(src.gather + j) : -1;
      slot_blk[j] = blk;
      slot_cnt[j] = blk < 0 ? 0 : max(0, min(p.block_kv, p.n_kv - blk * p.block_kv));
    }
  } else {
    src.kv0 = __ldg(p.meta.kv_tile + e) * Cfg::TKV;
  }
  return src;
}

/// The T_KV rows of one K or V tile (base: K or V of the (batch, kv head), row stride `stride`) into the
/// swizzled shared buffer `dst`. log2_bkv: log2(B_KV) (packed tiles have c_kv * B_KV == T_KV, a power of two).
template <class Cfg, bool kPacked>
__device__ __forceinline__ void load_kv_rows(std::uint32_t dst, const typename Cfg::Elem* base, std::int64_t stride,
                                             const KvTileSource& src, const AttentionParams& p, int log2_bkv) {
#pragma unroll 2
  for (int i = threadIdx.x; i < Cfg::TKV * Cfg::kChunks; i += Cfg::kThreads) {
    const int r = i / Cfg::kChunks, c = i % Cfg::kChunks;
    int tok;
    if constexpr (kPacked) {
      const int slot = r >> log2_bkv, within = r - (slot << log2_bkv);
      const int blk = src.gather[slot];
      tok = blk < 0 ? -1 : blk * p.block_kv + within;
    } else {
      tok = src.kv0 + r;
    }
    const bool ok = tok >= 0 && tok < p.n_kv;
    const typename Cfg::Elem* s = ok ? base + std::int64_t(tok) * stride + c * 8 : base;
    ptx::cp_async_16_zfill(dst + ptx::swizzle_offset<Cfg::kChunks>(r, c), s, ok);
  }
}

}  // namespace tessera::kernels::mma
