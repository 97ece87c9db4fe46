#pragma once
// Pieces every family's per-entry launcher shares: the shared-memory opt-in of a kernel, once per device, and the
// dispatch of a run-time KvVariant to the kernel instantiated for it.
#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cuda/check.cuh"
#include "kernels/launch.hpp"

namespace tessera::kernels {

/// Raises kernel `fn`'s dynamic shared-memory limit to `bytes` on the current device, the first time only:
/// the opt-in is a per-device attribute of the kernel, and setting it on every launch costs host time. `opted_in`
/// (one per kernel) holds bit d once done on device d (devices 0..63; others set it every time). `carveout_percent`
/// (0-100; -1: leave the driver's choice) is the preferred share of the SM's L1/shared-memory storage that goes to
/// shared memory (cudaFuncAttributePreferredSharedMemoryCarveout): enough for the CTAs per SM the kernel was built
/// for (wgmma: Config::kMinBlocks), so that the driver never picks a carveout that fits fewer.
inline void opt_in_smem_once(const void* fn, int bytes, std::atomic<std::uint64_t>& opted_in,
                             int carveout_percent = -1) {
  int dev = 0;
  TESSERA_CUDA_CHECK(cudaGetDevice(&dev));
  const std::uint64_t bit = dev < 64 ? std::uint64_t{1} << dev : 0;
  if (bit == 0 || !(opted_in.load(std::memory_order_relaxed) & bit)) {
    TESSERA_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    if (carveout_percent >= 0)
      TESSERA_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributePreferredSharedMemoryCarveout, carveout_percent));
    opted_in.fetch_or(bit, std::memory_order_relaxed);
  }
}

/// CTAs of kernel `fn` (`threads` threads, `smem_bytes` of dynamic shared memory) resident on the current device at
/// once: the occupancy calculator's CTAs per SM times the SM count, at least 1. Computed once per device; `cache`
/// (one per kernel) holds it for devices 0..63 (others compute it every time). Persistent kernels launch this many.
inline int resident_ctas_once(const void* fn, int threads, std::size_t smem_bytes, std::atomic<int> (&cache)[64]) {
  int dev = 0;
  TESSERA_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 64) {
    const int c = cache[dev].load(std::memory_order_relaxed);
    if (c > 0) return c;
  }
  int per_sm = 0, sms = 0;
  TESSERA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, threads, smem_bytes));
  TESSERA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  if (per_sm * sms <= 0)  // the kernel cannot be resident at all: no launch could run it either
    throw Error(ErrorCode::kCudaError, "kernel",
                "the occupancy calculator fits no CTA of this kernel (" + std::to_string(smem_bytes) +
                    " bytes of shared memory, " + std::to_string(threads) + " threads) on device " +
                    std::to_string(dev));
  const int c = per_sm * sms;
  if (dev < 64) cache[dev].store(c, std::memory_order_relaxed);
  return c;
}

/// Calls f(std::integral_constant<KvVariant, V>{}) for the variant V == v.
template <class F>
void with_variant(KvVariant v, F&& f) {
  switch (v) {
    case KvVariant::kSpan: f(std::integral_constant<KvVariant, KvVariant::kSpan>{}); break;
    case KvVariant::kSpanMasked: f(std::integral_constant<KvVariant, KvVariant::kSpanMasked>{}); break;
    case KvVariant::kPacked: f(std::integral_constant<KvVariant, KvVariant::kPacked>{}); break;
  }
}

}  // namespace tessera::kernels
