#pragma once
// Shared-memory stores of the swapped wgmma consumer (src/kernels/wgmma/consumer_swap.cuh), both written so that the
// compiler sees no branch (a compiler-visible data-dependent branch while a wgmma is in flight makes ptxas serialize
// the wgmma, C7518):
//   stmatrix_x4_trans  stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 (sm_90): a warp stores four 8x8 matrices of
//                      16-bit elements held in the mma.sync accumulator arrangement (ptx/mma.cuh: thread l holds row
//                      l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of each matrix, packed as by pack2), transposed:
//                      memory row c of matrix j receives column c of the fragment (8 contiguous elements, 16 bytes) at
//                      the address lane 8 j + c supplies. Any 16-byte-aligned row addresses, so a 128-byte-swizzled
//                      destination only needs each row's address swizzled.
//   st_shared_v2_f32_if  a predicated st.shared.v2.f32.
#include <cstdint>

#include "kernels/ptx/arch.cuh"

namespace tessera::ptx {

/// Stores matrices j = 0..3 (register r[j] of every lane) transposed; `row_addr` is this lane's row address
/// (shared space, 16-byte aligned): row lane % 8 of matrix lane / 8.
__device__ __forceinline__ void stmatrix_x4_trans(std::uint32_t row_addr, const std::uint32_t (&r)[4]) {
#if TESSERA_SM90
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(row_addr), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
#else
  __trap();
#endif
}

/// Stores (x, y) to the 8-byte-aligned shared address `addr` when `pred` holds (one predicated instruction).
__device__ __forceinline__ void st_shared_v2_f32_if(std::uint32_t addr, float x, float y, bool pred) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %3, 0;\n@p st.shared.v2.f32 [%0], {%1, %2};\n}\n" ::"r"(addr), "f"(x),
               "f"(y), "r"(int(pred))
               : "memory");
}

}  // namespace tessera::ptx
