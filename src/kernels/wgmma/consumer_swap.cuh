#pragma once
// The swapped consumer (Config::kSwapAB: T_Q = 16 or 32, below wgmma's 64-row minimum; MagiAttention FFA's SwapAB,
// hopper_anchors.md section 5): one consumer warpgroup computes the transposed products
//
//   S^T = K Q^T      wgmma M = the tile's 64 kv rows (A = K, K-major), N = the T_Q query rows (B = Q, K-major)
//   O^T += V^T P^T   per 64-row block of the head dimension: M = D rows (A = V^T: V's rows read MN-major), N = T_Q,
//                    k = the 64 kv rows; B = P^T, staged in shared memory (K-major: T_Q rows of 64 kv, 128 bytes,
//                    128-byte swizzled) by stmatrix.trans from the S^T accumulators
//
// so no wgmma row is padding. The softmax runs down the columns of S^T (softmax_swap.cuh: shuffles, then the 4 warps
// through shared memory). Per entry j (the intra-warpgroup overlap of consumer.cuh, with P^T in shared memory):
//
//   wait K(j); issue S(j)^T = K(j) Q^T                  | commit
//   j > 0: wait V(j-1); issue O^T += V(j-1)^T P(j-1)^T  | commit
//   wait until S(j) retired (PV(j-1) may still run); release K(j)
//   mask S(j)^T; column softmax score step (barrier kMaxBarrier)
//   j > 0: wait until PV(j-1) retired; release V(j-1)
//   O^T *= alpha; stage P(j)^T in buffer j % 2; fence.proxy.async; barrier kPBarrier
//
// and after the last entry O^T += V(n-1)^T P(n-1)^T. Two P^T buffers: P(j) is written while no warp can still read
// buffer j % 2 through PV(j-2) (every warp waited for PV(j-2) before the barrier of tile j-1), which a single buffer
// could not promise for PV(j-1) (a warp's wgmma_wait covers its own part of the product). The producer and the
// pipeline are the other organisation's (producer.cuh, pipeline.cuh), so the deadlock argument of consumer.cuh holds.
//
// Epilogue: the column sums are reduced like the maxima; O (normalized, fp32) is transposed through the K and V rings
// (all loads have landed and been read by then) and written by rows, pairs of columns per thread, rows < q_len only.
#include <cstdint>

#include "kernels/output.cuh"
#include "kernels/ptx/named_barrier.cuh"
#include "kernels/ptx/proxy_fence.cuh"
#include "kernels/ptx/smem_store.cuh"
#include "kernels/ptx/wgmma.cuh"
#include "kernels/wgmma/consumer.cuh"
#include "kernels/wgmma/masking_swap.cuh"
#include "kernels/wgmma/params.cuh"
#include "kernels/wgmma/pipeline.cuh"
#include "kernels/wgmma/softmax_swap.cuh"

namespace tessera::kernels::wgmma {

/// S^T = K Q^T over the head dimension: D / 16 wgmma k steps (32 bytes each inside a 128-byte panel row).
template <class Cfg>
__device__ __forceinline__ void qk_swap_gemm(float (&s)[Cfg::TQ / 2], std::uint32_t q_rows, std::uint32_t k_stage) {
  using T = typename Cfg::Elem;
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < Cfg::D / 16; ++kk) {
    const std::uint32_t off = (kk % 4) * 32;
    const std::uint64_t da = ptx::make_smem_desc(k_stage + (kk / 4) * Cfg::kKvPanelBytes + off, 16, kAtomBytes);
    const std::uint64_t db = ptx::make_smem_desc(q_rows + (kk / 4) * Cfg::kQPanelBytes + off, 16, kAtomBytes);
    ptx::wgmma_ss<Cfg::TQ, 0, T, 0>(s, da, db, kk > 0);
  }
}

/// O^T += V^T P^T: for each 64-column panel mb of V (a 64-row block of O^T), T_KV / 16 k steps of 16 kv rows (2048
/// bytes of the MN-major V panel); B = P^T, 16 kv (32 bytes) per k step of its 128-byte rows.
template <class Cfg>
__device__ __forceinline__ void pv_swap_gemm(float (&o)[Cfg::kMBlocks][Cfg::TQ / 2], std::uint32_t v_stage,
                                             std::uint32_t p_buf) {
  using T = typename Cfg::Elem;
  ptx::wgmma_fence();  // O^T was rescaled by ordinary instructions
#pragma unroll
  for (int mb = 0; mb < Cfg::kMBlocks; ++mb)
#pragma unroll
    for (int kk = 0; kk < Cfg::TKV / 16; ++kk) {
      const std::uint64_t da = ptx::make_smem_desc(v_stage + mb * Cfg::kKvPanelBytes + kk * 16 * Cfg::kRowBytes,
                                                   Cfg::kKvPanelBytes, kAtomBytes);
      const std::uint64_t db = ptx::make_smem_desc(p_buf + kk * 32, 16, kAtomBytes);
      ptx::wgmma_ss<Cfg::TQ, 0, T, 1>(o[mb], da, db, true);
    }
}

/// Stages the probabilities (S^T accumulators, kv rows x query columns) as P^T in `p_buf`: query row q holds the 64 kv
/// values of the tile, 128-byte swizzled (16-byte chunk c of row q at chunk c ^ (q % 8)). Each warp stores its 16 kv
/// rows with T_Q / 16 stmatrix.x4.trans: matrix j of store u is kv half a = j % 2 (rows 16 w + 8 a ..) and query
/// block b = 2 u + j / 2 (the n8 tile of the accumulators). Then fence.proxy.async and the warpgroup's barrier
/// kPBarrier, after which the PV wgmma may read the buffer.
template <class Cfg>
__device__ __forceinline__ void stage_p(const float (&s)[Cfg::TQ / 2], std::uint32_t p_buf, int warp, int lane) {
  using T = typename Cfg::Elem;
#pragma unroll
  for (int u = 0; u < Cfg::TQ / 16; ++u) {
    std::uint32_t r[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int a = j & 1, b = 2 * u + (j >> 1);
      r[j] = ptx::pack2<T>(s[4 * b + 2 * a], s[4 * b + 2 * a + 1]);
    }
    const int j = lane / 8, a = j & 1, b = 2 * u + (j >> 1);
    const int q = 8 * b + lane % 8, chunk = (2 * warp + a) ^ (q % 8);
    ptx::stmatrix_x4_trans(p_buf + q * std::uint32_t(Cfg::kRowBytes) + chunk * 16, r);
  }
  ptx::fence_proxy_async_shared();
  ptx::named_barrier_sync(Cfg::kPBarrier, 128);
}

/// The swapped consumer warpgroup's whole work for item `it`, epilogue included.
template <class Cfg, KvVariant V>
__device__ __forceinline__ void consumer_swap_loop(const KernelParams& kp, const WorkItem& it, unsigned char* smem,
                                                   const Barriers<Cfg>& bar) {
  const AttentionParams& p = kp.p;
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  // Entry count as a warp-uniform value (a shuffle from lane 0), so that the loop is not a divergent path.
  const int n = __shfl_sync(0xffffffffu, it.entry_end - it.entry_begin, 0);
  const std::uint32_t base = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  const std::uint32_t q_rows = base + Cfg::kQOffset, p_buf0 = base + Cfg::kPOffset;
  float* red = reinterpret_cast<float*>(smem + Cfg::kRedOffset);
  const float scale_log2 = p.scale * 1.4426950408889634f;

  float o[Cfg::kMBlocks][Cfg::TQ / 2];
#pragma unroll
  for (int mb = 0; mb < Cfg::kMBlocks; ++mb)
#pragma unroll
    for (int i = 0; i < Cfg::TQ / 2; ++i) o[mb][i] = 0.f;
  float s[Cfg::TQ / 2];
  ColumnState<Cfg::kCols> st;
  SwapTileMask<Cfg, V> mask;
  mask.init(p, warp, lane);
  PipelineState<Cfg::S> kr;          // K(j) read position
  PipelineState<Cfg::kVStages> vr;  // V(j-1) read position

  if (n > 0) {
    consumer_wait(bar.q_full, 0, 0);
    {  // Tile 0: S(0)^T, softmax, P(0)^T; nothing to overlap with yet.
      consumer_wait(bar.k_full, kr.stage, kr.phase);
      qk_swap_gemm<Cfg>(s, q_rows, base + Cfg::kKOffset + kr.stage * Cfg::kKvBytes);
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
      fence_all(s);
      consumer_release(bar.k_empty, kr.stage);
      kr.advance();
      mask.apply(s, p, it.entry_begin);
      float alpha[Cfg::kCols];
      softmax_swap_scores<Cfg>(s, st, scale_log2, alpha, red, warp, lane);  // alpha = 0: O is still 0
      stage_p<Cfg>(s, p_buf0, warp, lane);
    }
    for (int j = 1; j < n; ++j) {
      consumer_wait(bar.k_full, kr.stage, kr.phase);
      fence_all(s);
      qk_swap_gemm<Cfg>(s, q_rows, base + Cfg::kKOffset + kr.stage * Cfg::kKvBytes);
      ptx::wgmma_commit();
      consumer_wait(bar.v_full, vr.stage, vr.phase);
#pragma unroll
      for (int mb = 0; mb < Cfg::kMBlocks; ++mb) fence_all(o[mb]);
      pv_swap_gemm<Cfg>(o, base + Cfg::kVOffset + vr.stage * Cfg::kKvBytes, p_buf0 + ((j - 1) & 1) * Cfg::kPBytes);
      ptx::wgmma_commit();
      ptx::wgmma_wait<1>();  // S(j)^T retired; PV(j-1) may still run
      fence_all(s);
      consumer_release(bar.k_empty, kr.stage);
      kr.advance();
      mask.apply(s, p, it.entry_begin + j);
      float alpha[Cfg::kCols];
      softmax_swap_scores<Cfg>(s, st, scale_log2, alpha, red, warp, lane);
      ptx::wgmma_wait<0>();  // PV(j-1) retired
#pragma unroll
      for (int mb = 0; mb < Cfg::kMBlocks; ++mb) fence_all(o[mb]);
      consumer_release(bar.v_empty, vr.stage);
      vr.advance();
      rescale_o_swap<Cfg>(o, alpha);
      stage_p<Cfg>(s, p_buf0 + (j & 1) * Cfg::kPBytes, warp, lane);
    }
    consumer_wait(bar.v_full, vr.stage, vr.phase);
#pragma unroll
    for (int mb = 0; mb < Cfg::kMBlocks; ++mb) fence_all(o[mb]);
    pv_swap_gemm<Cfg>(o, base + Cfg::kVOffset + vr.stage * Cfg::kKvBytes, p_buf0 + ((n - 1) & 1) * Cfg::kPBytes);
    ptx::wgmma_commit();
    ptx::wgmma_wait<0>();
#pragma unroll
    for (int mb = 0; mb < Cfg::kMBlocks; ++mb) fence_all(o[mb]);
    consumer_release(bar.v_empty, vr.stage);
  }

  // Epilogue. Column sums over the warpgroup (the last use of `red` was read before the last kPBarrier).
  float l[Cfg::kCols];
#pragma unroll
  for (int ci = 0; ci < Cfg::kCols; ++ci) l[ci] = st.l[ci];
  reduce_columns<Cfg, false>(l, red, warp, lane);
  // O^T normalized, transposed into [T_Q][D + 4] fp32 over the K and V rings (every load has landed and been read).
  constexpr int kPitch = Cfg::D + 4;
  float* os = reinterpret_cast<float*>(smem + Cfg::kKOffset);
  const int g = lane / 4, t2 = 2 * (lane & 3);
#pragma unroll
  for (int ci = 0; ci < Cfg::kCols; ++ci) {
    const int idx = 4 * (ci / 2) + (ci & 1), q = 8 * (ci / 2) + t2 + (ci & 1);
    const float inv = l[ci] > 0.f ? 1.f / l[ci] : 0.f;
#pragma unroll
    for (int mb = 0; mb < Cfg::kMBlocks; ++mb)
#pragma unroll
      for (int h = 0; h < 2; ++h) os[q * kPitch + 64 * mb + 16 * warp + g + 8 * h] = o[mb][idx + 2 * h] * inv;
    if (warp == 0 && g == 0 && q < it.q_len)
      store_lse<Cfg>(p, it, q, l[ci] > 0.f ? (st.m[ci] + __log2f(l[ci])) * 0.6931471805599453f : -INFINITY);
  }
  ptx::named_barrier_sync(Cfg::kPBarrier, 128);
  for (int x = t; x < Cfg::TQ * (Cfg::D / 2); x += 128) {
    const int r = x / (Cfg::D / 2), c = 2 * (x % (Cfg::D / 2));
    if (r < it.q_len) store_pair<Cfg>(p, it, r, c, os[r * kPitch + c], os[r * kPitch + c + 1]);
  }
}

}  // namespace tessera::kernels::wgmma
