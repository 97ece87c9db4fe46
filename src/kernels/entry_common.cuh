#pragma once
// Pieces every family's per-entry launcher shares: the shared-memory opt-in of a kernel, once per device, and the
// dispatch of a run-time KvVariant to the kernel instantiated for it.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "cuda/check.cuh"
#include "kernels/launch.hpp"

namespace tessera::kernels {

/// Raises kernel `fn`'s dynamic shared-memory limit to `bytes` on the current device, the first time only:
/// the opt-in is a per-device attribute of the kernel, and setting it on every launch costs host time. `opted_in`
/// (one per kernel) holds bit d once done on device d (devices 0..63; others set it every time).
inline void opt_in_smem_once(const void* fn, int bytes, std::atomic<std::uint64_t>& opted_in) {
  int dev = 0;
  TESSERA_CUDA_CHECK(cudaGetDevice(&dev));
  const std::uint64_t bit = dev < 64 ? std::uint64_t{1} << dev : 0;
  if (bit == 0 || !(opted_in.load(std::memory_order_relaxed) & bit)) {
    TESSERA_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    opted_in.fetch_or(bit, std::memory_order_relaxed);
  }
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
