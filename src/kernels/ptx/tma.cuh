#pragma once
// Tensor-memory-accelerator (TMA) wrappers (sm_90): bulk tensor copies global -> shared described by a tensor map
// (CUtensorMap, 128 bytes, encoded on the host: src/kernels/wgmma/tensor_map.hpp) and completed on an mbarrier by
// transaction bytes. Elements of a box outside the tensor's extent are zero-filled and still count their bytes, so a
// box wholly past the end completes like any other (tests/gpu/test_ptx_sm90.cu checks both).
#include <cuda/ptx>

#include <cstdint>

#include "kernels/ptx/arch.cuh"

namespace tessera::ptx {

/// Copies the box at coordinates (c0, c1, c2, c3) (innermost first, in elements) of the 4-D tensor map `map` (a
/// __grid_constant__ kernel parameter) to shared memory `dst` (aligned as the map's swizzle requires: 1024 bytes for
/// 128-byte swizzle) and completes the transaction on `bar`. One thread.
__device__ __forceinline__ void tma_load_4d(void* dst, const void* map, int c0, int c1, int c2, int c3,
                                            std::uint64_t* bar) {
#if TESSERA_SM90
  const std::int32_t coords[4] = {c0, c1, c2, c3};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, map, coords, bar);
#else
  __trap();
#endif
}

/// Prefetches tensor map `map` into the descriptor cache (before its first use).
__device__ __forceinline__ void prefetch_tensor_map(const void* map) {
#if TESSERA_SM90
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<std::uint64_t>(map)) : "memory");
#else
  __trap();
#endif
}

/// elect.sync: true in exactly one active lane of the (fully active) warp.
__device__ __forceinline__ bool elect_one() {
#if TESSERA_SM90
  std::uint32_t pred = 0;
  asm volatile(
      "{\n .reg .pred P;\n elect.sync _|P, 0xffffffff;\n selp.u32 %0, 1, 0, P;\n}\n"
      : "=r"(pred));
  return pred != 0;
#else
  return (threadIdx.x & 31) == 0;
#endif
}

}  // namespace tessera::ptx
