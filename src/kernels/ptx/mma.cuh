#pragma once
// mma.sync m16n8k16 with fp32 accumulation, for bf16 and fp16 operands (sm_80 and later).
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"), g = lane / 4, t = lane % 4:
//   A (16x16, row-major):  a[0] = A[g][2t..2t+1],   a[1] = A[g+8][2t..2t+1],
//                          a[2] = A[g][2t+8..2t+9], a[3] = A[g+8][2t+8..2t+9]     (two 16-bit values per register)
//   B (16x8, "col"):       b[0] = B[2t..2t+1][g],   b[1] = B[2t+8..2t+9][g]
//   C/D (16x8, fp32):      c[0..1] = C[g][2t..2t+1], c[2..3] = C[g+8][2t..2t+1]
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace tessera::ptx {

/// D = A * B + D for one m16n8k16 tile; A, B bf16 (packed pairs), C/D fp32.
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2],
                                             __nv_bfloat16 /*tag*/) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/// D = A * B + D for one m16n8k16 tile; A, B fp16 (packed pairs), C/D fp32.
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2],
                                             __half /*tag*/) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/// Packs two floats into one register of two 16-bit values of type T (x in the low half), round to nearest.
template <class T>
__device__ __forceinline__ std::uint32_t pack2(float x, float y);

template <>
__device__ __forceinline__ std::uint32_t pack2<__nv_bfloat16>(float x, float y) {
  __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
  return *reinterpret_cast<std::uint32_t*>(&v);
}

template <>
__device__ __forceinline__ std::uint32_t pack2<__half>(float x, float y) {
  __half2 v = __floats2half2_rn(x, y);
  return *reinterpret_cast<std::uint32_t*>(&v);
}

/// exp2 with the hardware approximation (ex2.approx.ftz.f32); exp2(-inf) = 0.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace tessera::ptx
