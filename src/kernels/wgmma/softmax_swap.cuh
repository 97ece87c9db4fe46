#pragma once
// Online softmax of the swapped consumer (consumer_swap.cuh) on the transposed score tile S^T (kv rows x query
// columns): the softmax runs down columns, across the 64 kv rows that the warpgroup's 4 warps hold 16 each, so every
// column maximum is reduced within the warp (shuffles over its 8 row groups) and then across the warps, through
// shared memory ([4 warps][T_Q] fp32) and the consumer warpgroup's named barrier kMaxBarrier. The row sums stay
// per thread (its two rows of each column) until the epilogue: every thread rescales by the same column factor, so
// the partial sums add up. Log2 units and -inf safety as softmax.cuh: a column whose scores are all -inf so far keeps
// m = -inf and exp2(-inf) = 0 everywhere, never NaN.
//
// Buffer reuse: a warp writes the maxima of tile j + 1 only after the P^T barrier of tile j (consumer_swap.cuh), which
// every warp reaches only after reading the maxima of tile j.
#include "kernels/ptx/mma.cuh"
#include "kernels/ptx/named_barrier.cuh"
#include "kernels/ptx/smem_store.cuh"

namespace tessera::kernels::wgmma {

/// Running maximum m (log2 units, the whole column's) and partial sum l (this thread's rows) of each of the thread's
/// T_Q / 4 query columns ci = 2 i + k (column 8 i + 2 t + k).
template <int kCols>
struct ColumnState {
  float m[kCols];
  float l[kCols];
  __device__ __forceinline__ ColumnState() {
#pragma unroll
    for (int c = 0; c < kCols; ++c) m[c] = -INFINITY, l[c] = 0.f;
  }
};

/// Sums (kMax = false) or maximizes (true) per-thread column values v over the warpgroup's 64 kv rows: the warp's 8
/// row groups by shuffles, then the 4 warps through `red` ([4][T_Q] fp32 in shared memory), with the named barrier
/// kMaxBarrier between the stores and the loads; the caller orders the next use of `red` after a later barrier.
template <class Cfg, bool kMax>
__device__ __forceinline__ void reduce_columns(float (&v)[Cfg::kCols], float* red, int warp, int lane) {
  const std::uint32_t red_addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(red));
#pragma unroll
  for (int c = 0; c < Cfg::kCols; ++c)
#pragma unroll
    for (int x = 4; x < 32; x *= 2) {
      const float o = __shfl_xor_sync(0xffffffffu, v[c], x);
      v[c] = kMax ? fmaxf(v[c], o) : v[c] + o;
    }
  const int t2 = 2 * (lane & 3);
#pragma unroll
  for (int i = 0; i < Cfg::TQ / 8; ++i)  // lanes 0..3 (row group 0) publish the warp's columns 8 i + t2, + 1
    ptx::st_shared_v2_f32_if(red_addr + 4u * std::uint32_t(warp * Cfg::TQ + 8 * i + t2), v[2 * i], v[2 * i + 1],
                             lane < 4);
  ptx::named_barrier_sync(Cfg::kMaxBarrier, 128);
#pragma unroll
  for (int i = 0; i < Cfg::TQ / 8; ++i) {
    float2 a[4];
#pragma unroll
    for (int w = 0; w < 4; ++w) a[w] = *reinterpret_cast<const float2*>(red + w * Cfg::TQ + 8 * i + t2);
    v[2 * i] = kMax ? fmaxf(fmaxf(a[0].x, a[1].x), fmaxf(a[2].x, a[3].x)) : (a[0].x + a[1].x) + (a[2].x + a[3].x);
    v[2 * i + 1] = kMax ? fmaxf(fmaxf(a[0].y, a[1].y), fmaxf(a[2].y, a[3].y)) : (a[0].y + a[1].y) + (a[2].y + a[3].y);
  }
}

/// Score step on S^T: updates the column maxima with tile s (raw dot products, -inf where masked), replaces s by the
/// unnormalized probabilities exp2(s * scale_log2 - m), adds them to l, and returns in alpha the factors by which the
/// columns of O^T must be rescaled.
template <class Cfg>
__device__ __forceinline__ void softmax_swap_scores(float (&s)[Cfg::TQ / 2], ColumnState<Cfg::kCols>& st,
                                                    float scale_log2, float (&alpha)[Cfg::kCols], float* red,
                                                    int warp, int lane) {
  float mx[Cfg::kCols];
#pragma unroll
  for (int ci = 0; ci < Cfg::kCols; ++ci) {
    const int idx = 4 * (ci / 2) + (ci & 1);
    mx[ci] = fmaxf(s[idx], s[idx + 2]);
  }
  reduce_columns<Cfg, true>(mx, red, warp, lane);
#pragma unroll
  for (int ci = 0; ci < Cfg::kCols; ++ci) {
    const int idx = 4 * (ci / 2) + (ci & 1);
    const float m_new = fmaxf(st.m[ci], mx[ci] * scale_log2);
    const float m_use = m_new == -INFINITY ? 0.f : m_new;
    alpha[ci] = ptx::exp2_approx(st.m[ci] - m_use);
    st.m[ci] = m_new;
    const float p0 = ptx::exp2_approx(fmaf(s[idx], scale_log2, -m_use));
    const float p1 = ptx::exp2_approx(fmaf(s[idx + 2], scale_log2, -m_use));
    s[idx] = p0;
    s[idx + 2] = p1;
    st.l[ci] = st.l[ci] * alpha[ci] + (p0 + p1);
  }
}

/// O step: O^T *= alpha, column-wise (accumulator layout of m64nT_Qk16, one accumulator per 64-row block of D).
template <class Cfg>
__device__ __forceinline__ void rescale_o_swap(float (&o)[Cfg::kMBlocks][Cfg::TQ / 2], const float (&alpha)[Cfg::kCols]) {
#pragma unroll
  for (int mb = 0; mb < Cfg::kMBlocks; ++mb)
#pragma unroll
    for (int ci = 0; ci < Cfg::kCols; ++ci) {
      const int idx = 4 * (ci / 2) + (ci & 1);
      o[mb][idx] *= alpha[ci];
      o[mb][idx + 2] *= alpha[ci];
    }
}

}  // namespace tessera::kernels::wgmma
