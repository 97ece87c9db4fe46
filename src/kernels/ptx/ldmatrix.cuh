#pragma once
// ldmatrix: warp-wide loads of 8x8 matrices of 16-bit elements from shared memory into mma fragments.
// Lane l supplies the address of one 8-element (16-byte) row: lanes 0-7 rows of matrix 0, 8-15 matrix 1,
// 16-23 matrix 2, 24-31 matrix 3. Without .trans, register r[i] of lane l holds matrix i's row l/4,
// columns 2(l%4)..2(l%4)+1; with .trans it holds column l/4, rows 2(l%4)..2(l%4)+1.
#include <cstdint>

namespace tessera::ptx {

/// Shared-memory address (32-bit, .shared window) of a generic pointer into shared memory.
__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

/// Four 8x8 matrices, no transpose.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

/// Four 8x8 matrices, transposed.
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

/// Two 8x8 matrices (addresses from lanes 0-15), no transpose.
__device__ __forceinline__ void ldmatrix_x2(std::uint32_t (&r)[2], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}

/// Two 8x8 matrices (addresses from lanes 0-15), transposed.
__device__ __forceinline__ void ldmatrix_x2_trans(std::uint32_t (&r)[2], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}

}  // namespace tessera::ptx
