#pragma once
// Named CTA barriers (bar.sync / bar.arrive on barriers 1-15; barrier 0 is __syncthreads): a subset of the CTA's
// warps synchronizes, or producer warps signal consumer warps without waiting. `threads` counts every thread that
// takes part (arriving and waiting), a multiple of 32. A barrier completes when that many have arrived; a thread
// must not arrive again at the same barrier before it has completed (alternate two barrier ids for a pipeline).
// Memory: accesses before bar.arrive / bar.sync are performed relative to the threads that wait on the barrier
// (PTX memory model: bar.arrive synchronizes with bar.sync on the same barrier).
#include <cstdint>

namespace tessera::ptx {

/// Waits until `threads` threads (this one included) have arrived at barrier `id`.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

/// Marks this thread's arrival at barrier `id` (of `threads` threads) without waiting.
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace tessera::ptx
