#pragma once
// Global -> shared loads of the Q tile and of one K or V tile (span or packed), by cp.async with zero-fill into
// swizzled shared memory. Rows that do not exist (past N, empty packed slots) are zero-filled so that
// P (= 0) * V never meets garbage.
#include "kernels/launch.hpp"
#include "kernels/ptx/cp_async.cuh"
#include "kernels/ptx/swizzle.cuh"

namespace tessera::kernels::mma {

/// Per-thread share of a copy of R rows x kChunks 16-byte chunks by the CTA's kThreads threads: thread t copies
/// chunk t % kChunks of rows t / kChunks + k * kRowStep, k < kPasses (fully unrolled, no loop-carried index math).
/// When kRowStep is a multiple of 8 every pass lands at the same swizzle phase, so the shared offset of pass k is
/// the thread's first offset plus a compile-time constant.
template <class Cfg, int R>
struct RowCopy {
  static constexpr int kRowStep = Cfg::kThreads / Cfg::kChunks;
  static constexpr int kPasses = (R + kRowStep - 1) / kRowStep;
  static constexpr bool kRagged = kPasses * kRowStep > R;  // the last pass has threads without a row
  static_assert(Cfg::kThreads % Cfg::kChunks == 0, "whole rows per pass");
  /// Shared byte offset of (row r0 + k * kRowStep, chunk c); off0 = swizzle_offset(r0, c).
  static __device__ __forceinline__ std::uint32_t offset(std::uint32_t off0, int r0, int c, int k) {
    if constexpr (kRowStep % 8 == 0) {
      return off0 + static_cast<std::uint32_t>(k * kRowStep * Cfg::kChunks * 16);
    } else {
      return ptx::swizzle_offset<Cfg::kChunks>(r0 + k * kRowStep, c);
    }
  }
};

/// Q tile rows [0, q_len) of (b, h) starting at token q_start; rows past q_len are zero.
template <class Cfg>
__device__ __forceinline__ void load_q(std::uint32_t sq, const AttentionParams& p, const WorkItem& it) {
  using T = typename Cfg::Elem;
  using RC = RowCopy<Cfg, Cfg::TQ>;
  const T* base = static_cast<const T*>(p.q) + it.batch * p.q_stride_b + it.head * p.q_stride_h;
  const int r0 = threadIdx.x / Cfg::kChunks, c = threadIdx.x % Cfg::kChunks;
  const std::uint32_t off0 = ptx::swizzle_offset<Cfg::kChunks>(r0, c);
  const T* g = base + std::int64_t(it.q_start + r0) * p.q_stride_n + c * 8;  // row r0 + k * kRowStep after k steps
  const std::int64_t step = std::int64_t(RC::kRowStep) * p.q_stride_n;
#pragma unroll
  for (int k = 0; k < RC::kPasses; ++k) {
    const int r = r0 + k * RC::kRowStep;
    if (RC::kRagged && r >= Cfg::TQ) break;
    const bool ok = r < it.q_len;
    ptx::cp_async_16_zfill(sq + RC::offset(off0, r0, c, k), ok ? g : base, ok);
    g += step;
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
/// Fully unrolled (RowCopy): T_KV * kChunks / kThreads cp.async per thread issued back to back; a span tile's
/// global address advances by a per-tile constant, so each copy costs a compare, a select and an add.
template <class Cfg, bool kPacked>
__device__ __forceinline__ void load_kv_rows(std::uint32_t dst, const typename Cfg::Elem* base, std::int64_t stride,
                                             const KvTileSource& src, const AttentionParams& p, int log2_bkv) {
  using T = typename Cfg::Elem;
  using RC = RowCopy<Cfg, Cfg::TKV>;
  const int r0 = threadIdx.x / Cfg::kChunks, c = threadIdx.x % Cfg::kChunks;
  const std::uint32_t off0 = ptx::swizzle_offset<Cfg::kChunks>(r0, c);
  if constexpr (kPacked) {
    // Partly unrolled: a full unroll keeps every pass's gathered block live and spills the register-heavy tiles.
#pragma unroll 2
    for (int k = 0; k < RC::kPasses; ++k) {
      const int r = r0 + k * RC::kRowStep;
      if (RC::kRagged && r >= Cfg::TKV) break;
      const int slot = r >> log2_bkv, within = r - (slot << log2_bkv);
      const int blk = src.gather[slot];
      const int tok = blk < 0 ? -1 : blk * p.block_kv + within;
      const bool ok = tok >= 0 && tok < p.n_kv;
      const T* s = ok ? base + std::int64_t(tok) * stride + c * 8 : base;
      ptx::cp_async_16_zfill(dst + RC::offset(off0, r0, c, k), s, ok);
    }
  } else {
    const int rows_left = p.n_kv - src.kv0 - r0;  // rows r0 + k * kRowStep < rows_left exist
    const T* g = base + std::int64_t(src.kv0 + r0) * stride + c * 8;  // row r0 + k * kRowStep after k steps
    const std::int64_t step = std::int64_t(RC::kRowStep) * stride;
#pragma unroll
    for (int k = 0; k < RC::kPasses; ++k) {
      if (RC::kRagged && r0 + k * RC::kRowStep >= Cfg::TKV) break;
      const bool ok = k * RC::kRowStep < rows_left;
      // Rows past N: any valid-looking address (src-size 0 reads nothing); p.k comes from the constant bank.
      ptx::cp_async_16_zfill(dst + RC::offset(off0, r0, c, k), ok ? g : static_cast<const T*>(p.k), ok);
      g += step;
    }
  }
}

}  // namespace tessera::kernels::mma
