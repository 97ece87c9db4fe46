#pragma once
// Warp-level GEMM steps of the attention tile on mma.sync m16n8k16:
//   scores:  S[MT][NT] += Q(smem, ldmatrix) * K^T(smem, ldmatrix)
//   output:  O[MT][DT] += P(registers, converted from S) * V(smem, ldmatrix.trans)
#include "kernels/ptx/ldmatrix.cuh"
#include "kernels/ptx/mma.cuh"
#include "kernels/ptx/swizzle.cuh"

namespace tessera::kernels::mma {

/// S = Q K^T for this warp's MT row slabs (rows row0 + 16m ..) and the whole TKV tile. S is zeroed first.
template <class Cfg>
__device__ __forceinline__ void qk_scores(float (&s)[Cfg::MT][Cfg::NT][4], std::uint32_t sq, std::uint32_t sk,
                                          int row0, int lane) {
  using T = typename Cfg::Elem;
#pragma unroll
  for (int m = 0; m < Cfg::MT; ++m)
#pragma unroll
    for (int n = 0; n < Cfg::NT; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) s[m][n][i] = 0.f;
  const int mat = lane >> 3;
#pragma unroll 1
  for (int ks = 0; ks < Cfg::D / 16; ++ks) {
    std::uint32_t a[Cfg::MT][4];
#pragma unroll
    for (int m = 0; m < Cfg::MT; ++m)
      ptx::ldmatrix_x4(a[m], sq + ptx::swizzle_offset<Cfg::kChunks>(row0 + m * 16 + (lane & 15), ks * 2 + (lane >> 4)));
#pragma unroll
    for (int np = 0; np < Cfg::NT / 2; ++np) {
      std::uint32_t b[4];
      ptx::ldmatrix_x4(b, sk + ptx::swizzle_offset<Cfg::kChunks>(np * 16 + (mat >> 1) * 8 + (lane & 7), ks * 2 + (mat & 1)));
      const std::uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
#pragma unroll
      for (int m = 0; m < Cfg::MT; ++m) {
        ptx::mma_m16n8k16(s[m][2 * np], a[m], b0, T{});
        ptx::mma_m16n8k16(s[m][2 * np + 1], a[m], b1, T{});
      }
    }
  }
}

/// O += P V with P = S (already exponentiated) converted to 16-bit A fragments in registers.
template <class Cfg>
__device__ __forceinline__ void pv_accumulate(float (&o)[Cfg::MT][Cfg::DT][4], const float (&s)[Cfg::MT][Cfg::NT][4],
                                              std::uint32_t sv, int lane) {
  using T = typename Cfg::Elem;
  const int mat = lane >> 3;
#pragma unroll
  for (int kk = 0; kk < Cfg::TKV / 16; ++kk) {
    std::uint32_t a[Cfg::MT][4];
#pragma unroll
    for (int m = 0; m < Cfg::MT; ++m) {
      a[m][0] = ptx::pack2<T>(s[m][2 * kk][0], s[m][2 * kk][1]);
      a[m][1] = ptx::pack2<T>(s[m][2 * kk][2], s[m][2 * kk][3]);
      a[m][2] = ptx::pack2<T>(s[m][2 * kk + 1][0], s[m][2 * kk + 1][1]);
      a[m][3] = ptx::pack2<T>(s[m][2 * kk + 1][2], s[m][2 * kk + 1][3]);
    }
#pragma unroll
    for (int dp = 0; dp < Cfg::DT / 2; ++dp) {
      std::uint32_t b[4];
      ptx::ldmatrix_x4_trans(b, sv + ptx::swizzle_offset<Cfg::kChunks>(kk * 16 + (mat & 1) * 8 + (lane & 7), dp * 2 + (mat >> 1)));
      const std::uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
#pragma unroll
      for (int m = 0; m < Cfg::MT; ++m) {
        ptx::mma_m16n8k16(o[m][2 * dp], a[m], b0, T{});
        ptx::mma_m16n8k16(o[m][2 * dp + 1], a[m], b1, T{});
      }
    }
  }
}

}  // namespace tessera::kernels::mma
