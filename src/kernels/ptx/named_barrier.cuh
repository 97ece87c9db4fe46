#pragma once
// Named CTA barriers (bar.sync on barriers 1-15; barrier 0 is __syncthreads): a subset of the CTA's warps
// synchronizes. `threads` counts every thread that takes part, a multiple of 32; a barrier completes when that many
// have arrived. Memory: accesses before the barrier are performed relative to the threads that pass it.
#include <cstdint>

namespace tessera::ptx {

/// Waits until `threads` threads (this one included) have arrived at barrier `id`.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace tessera::ptx
