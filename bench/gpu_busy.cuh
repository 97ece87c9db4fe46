#pragma once
// Keeps the GPU busy for a given wall time before a timed region, so short, synchronised benchmarks run at the
// clock a real workload sees (in a DiT layer, attention and its preparation follow the QKV projection GEMMs).
// Without it, a benchmark whose GPU work is ~100 us between host synchronisations can run at the idle SM clock
// (495 MHz was read on the H200 before such a run), inflating its figures up to 4x.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/check.cuh"

namespace tessera::bench {

__device__ __forceinline__ std::uint64_t global_timer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Every thread spins until `ns` nanoseconds have passed on the global timer.
__global__ void busy_kernel(std::uint64_t ns) {
  const std::uint64_t t0 = global_timer_ns();
  while (global_timer_ns() - t0 < ns) {
  }
}

/// Enqueues a kernel that occupies every SM for `us` microseconds (wall time) on `stream`.
inline void keep_gpu_busy(cudaStream_t stream, double us) {
  int sms = 0, dev = 0;
  TESSERA_CUDA_CHECK(cudaGetDevice(&dev));
  TESSERA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  busy_kernel<<<sms * 4, 128, 0, stream>>>(static_cast<std::uint64_t>(us * 1e3));
  TESSERA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tessera::bench
