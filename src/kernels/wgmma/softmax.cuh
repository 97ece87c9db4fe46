#pragma once
// Online softmax of one consumer thread's two rows (log2 units: scores times scale * log2(e), exponentiated with
// exp2), split as in FlashAttention-3 into a score step, which may run while the previous tile's PV product is in
// flight, and an O step (rescale), which may only run once that product has retired. A row whose scores are all
// -inf so far keeps m = -inf and exp2(-inf) = 0 everywhere: no NaN ever arises.
#include "kernels/ptx/mma.cuh"

namespace tessera::kernels::wgmma {

/// Running maximum m (log2 units) and partial row sum l (this thread's columns; summed over the quad at the end) of
/// the thread's rows g and g + 8.
struct RowState {
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.f, 0.f};
};

/// Growth of a row maximum (log2 units) up to which the running maximum is kept (FlashAttention-4's conditional
/// rescaling): the probabilities are then exp2(s - m) <= 2^8 = 256, which bf16 rounds with the same relative error
/// as any other scale and which stays far from fp32's range in l and O, while O's rescale (D / 2 multiplies per thread
/// and tile, and the exp2 of alpha) is skipped on every tile where no row of the warp grows its maximum by more; once
/// the maxima settle, that is most tiles. The result does not depend on m: O and l carry the same factor.
inline constexpr float kRescaleThreshold = 8.f;

/// Score step: updates the row maxima with tile s (raw dot products, -inf where masked), replaces s by the
/// unnormalized probabilities exp2(s * scale_log2 - m), adds them to l, and returns whether O must be rescaled (by
/// alpha = exp2(m_old - m_new) per row; warp-uniform). The maxima move only when some row of the warp grows by more
/// than kRescaleThreshold (or leaves -inf); then every row of the warp takes its exact maximum. kConditional = false:
/// every tile takes the exact maxima and returns true (Config::kConditionalRescale says which tiles).
template <int TKV, bool kConditional = true>
__device__ __forceinline__ bool softmax_scores(float (&s)[TKV / 2], RowState& st, float scale_log2,
                                               float (&alpha)[2]) {
  float mx[2];
  bool grow = !kConditional;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < TKV / 8; ++i) m = fmaxf(m, fmaxf(s[4 * i + 2 * h], s[4 * i + 2 * h + 1]));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
    mx[h] = m * scale_log2;
    if constexpr (kConditional) grow |= mx[h] > st.m[h] + kRescaleThreshold;  // m = -inf: a finite maximum grows it
  }
  if constexpr (kConditional) grow = __any_sync(0xffffffffu, grow);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float m_new = grow ? fmaxf(st.m[h], mx[h]) : st.m[h];
    const float m_use = m_new == -INFINITY ? 0.f : m_new;
    alpha[h] = grow ? ptx::exp2_approx(st.m[h] - m_use) : 1.f;
    st.m[h] = m_new;
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < TKV / 8; ++i) {
      const float p0 = ptx::exp2_approx(fmaf(s[4 * i + 2 * h], scale_log2, -m_use));
      const float p1 = ptx::exp2_approx(fmaf(s[4 * i + 2 * h + 1], scale_log2, -m_use));
      s[4 * i + 2 * h] = p0;
      s[4 * i + 2 * h + 1] = p1;
      sum += p0 + p1;
    }
    st.l[h] = grow ? st.l[h] * alpha[h] + sum : st.l[h] + sum;
  }
  return grow;
}

/// O step: O *= alpha, row-wise (accumulator layout of m64nDk16).
template <int D>
__device__ __forceinline__ void rescale_o(float (&o)[D / 2], const float (&alpha)[2]) {
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    o[4 * i + 0] *= alpha[0];
    o[4 * i + 1] *= alpha[0];
    o[4 * i + 2] *= alpha[1];
    o[4 * i + 3] *= alpha[1];
  }
}

/// Packs the probabilities (accumulator layout of m64nTKVk16) into wgmma RS A fragments of the PV product: k step kk
/// covers kv columns 16 kk .. 16 kk + 15, i.e. n8 tiles 2 kk and 2 kk + 1 (the mma.sync A arrangement).
template <int TKV, class T>
__device__ __forceinline__ void pack_p(const float (&s)[TKV / 2], std::uint32_t (&pf)[TKV / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < TKV / 16; ++kk) {
    pf[kk][0] = ptx::pack2<T>(s[8 * kk + 0], s[8 * kk + 1]);
    pf[kk][1] = ptx::pack2<T>(s[8 * kk + 2], s[8 * kk + 3]);
    pf[kk][2] = ptx::pack2<T>(s[8 * kk + 4], s[8 * kk + 5]);
    pf[kk][3] = ptx::pack2<T>(s[8 * kk + 6], s[8 * kk + 7]);
  }
}

}  // namespace tessera::kernels::wgmma
