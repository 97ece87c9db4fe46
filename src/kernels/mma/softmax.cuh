#pragma once
// Online softmax over the score tile, in log2 units: scores are multiplied by scale * log2(e) and
// exponentiated with exp2. Per row the thread keeps the running maximum m (log2 units, -inf until a score is
// seen) and its partial row sum l (summed over the quad at the end). Rows whose scores are all -inf so far
// keep m = -inf and contribute exp2(-inf) = 0: no NaN ever arises.
#include "kernels/ptx/mma.cuh"

namespace tessera::kernels::mma {

/// Row state of one thread: rows g and g+8 of each of its MT slabs.
template <class Cfg>
struct RowState {
  float m[Cfg::MT][2];
  float l[Cfg::MT][2];
  __device__ __forceinline__ void init() {
#pragma unroll
    for (int i = 0; i < Cfg::MT; ++i) m[i][0] = m[i][1] = -INFINITY, l[i][0] = l[i][1] = 0.f;
  }
};

/// Updates the row state with score tile s (raw dot products, -inf where masked), rescales O, and replaces s
/// by the unnormalized probabilities exp2(s * scale_log2 - m).
template <class Cfg>
__device__ __forceinline__ void online_softmax(float (&s)[Cfg::MT][Cfg::NT][4], float (&o)[Cfg::MT][Cfg::DT][4],
                                               RowState<Cfg>& st, float scale_log2) {
#pragma unroll
  for (int mt = 0; mt < Cfg::MT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = -INFINITY;
#pragma unroll
      for (int n = 0; n < Cfg::NT; ++n) mx = fmaxf(mx, fmaxf(s[mt][n][2 * h], s[mt][n][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(st.m[mt][h], mx * scale_log2);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      const float alpha = ptx::exp2_approx(st.m[mt][h] - m_use);
      st.m[mt][h] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < Cfg::NT; ++n) {
        const float p0 = ptx::exp2_approx(fmaf(s[mt][n][2 * h], scale_log2, -m_use));
        const float p1 = ptx::exp2_approx(fmaf(s[mt][n][2 * h + 1], scale_log2, -m_use));
        s[mt][n][2 * h] = p0;
        s[mt][n][2 * h + 1] = p1;
        sum += p0 + p1;
      }
      st.l[mt][h] = st.l[mt][h] * alpha + sum;
#pragma unroll
      for (int d = 0; d < Cfg::DT; ++d) {
        o[mt][d][2 * h] *= alpha;
        o[mt][d][2 * h + 1] *= alpha;
      }
    }
  }
}

}  // namespace tessera::kernels::mma
