#pragma once
// Global -> shared loads of the Q tile and of one K/V tile (span or packed), by cp.async with zero-fill into
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

/// Token of row r of a span tile starting at kv0; -1 when past N_kv.
__device__ __forceinline__ int span_token(int kv0, int r, int n_kv) {
  const int t = kv0 + r;
  return t < n_kv ? t : -1;
}

/// K and V rows of entry e into stage buffers sk, sv. Packed: also records the slot blocks and valid-token
/// counts of the tile in slot_blk/slot_cnt (int[8] each, shared memory).
template <class Cfg, bool kPacked>
__device__ __forceinline__ void load_kv(std::uint32_t sk, std::uint32_t sv, int* slot_blk, int* slot_cnt,
                                        const AttentionParams& p, const WorkItem& it, int kv_head, int e) {
  using T = typename Cfg::Elem;
  const T* kb = static_cast<const T*>(p.k) + it.batch * p.k_stride_b + kv_head * p.k_stride_h;
  const T* vb = static_cast<const T*>(p.v) + it.batch * p.v_stride_b + kv_head * p.v_stride_h;
  const int c_kv = p.meta.c_kv_gather;
  const int* gather = kPacked ? p.meta.gather_blocks + std::int64_t(e) * c_kv : nullptr;
  const int kv0 = kPacked ? 0 : __ldg(p.meta.kv_tile + e) * Cfg::TKV;
  if (kPacked && threadIdx.x < Cfg::kMaxSlots) {
    const int j = threadIdx.x;
    const int blk = j < c_kv ? __ldg(gather + j) : -1;
    slot_blk[j] = blk;
    slot_cnt[j] = blk < 0 ? 0 : max(0, min(p.block_kv, p.n_kv - blk * p.block_kv));
  }
  for (int i = threadIdx.x; i < Cfg::TKV * Cfg::kChunks; i += Cfg::kThreads) {
    const int r = i / Cfg::kChunks, c = i % Cfg::kChunks;
    int tok;
    if constexpr (kPacked) {
      const int slot = r / p.block_kv, within = r - slot * p.block_kv;
      const int blk = __ldg(gather + slot);
      tok = blk < 0 ? -1 : blk * p.block_kv + within;
      if (tok >= p.n_kv) tok = -1;
    } else {
      tok = span_token(kv0, r, p.n_kv);
    }
    const bool ok = tok >= 0;
    const T* ks = ok ? kb + std::int64_t(tok) * p.k_stride_n + c * 8 : kb;
    const T* vs = ok ? vb + std::int64_t(tok) * p.v_stride_n + c * 8 : vb;
    const std::uint32_t off = ptx::swizzle_offset<Cfg::kChunks>(r, c);
    ptx::cp_async_16_zfill(sk + off, ks, ok);
    ptx::cp_async_16_zfill(sv + off, vs, ok);
  }
}

}  // namespace tessera::kernels::mma
