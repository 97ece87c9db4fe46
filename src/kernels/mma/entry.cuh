#pragma once
// Host launcher of one catalog entry (included by the generated per-entry translation units): instantiates
// the entry's three kernel variants and launches the one asked for.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "core/tile_metadata.hpp"
#include "cuda/check.cuh"
#include "kernels/launch.hpp"
#include "kernels/mma/attention.cuh"

namespace tessera::kernels::mma {

template <class Cfg, KvVariant V>
void launch_variant(const AttentionParams& p, Stream stream) {
  auto* fn = &attention_kernel<Cfg, V>;
  if constexpr (Cfg::kSmemBytes > 48 * 1024) {
    // The shared-memory opt-in is a per-device attribute of the kernel: set once per device, not per launch
    // (it costs host time on every call otherwise).
    static std::atomic<std::uint64_t> opted_in{0};  // bit d: done on device d (devices 0..63)
    int dev = 0;
    TESSERA_CUDA_CHECK(cudaGetDevice(&dev));
    const std::uint64_t bit = dev < 64 ? std::uint64_t{1} << dev : 0;
    if (bit == 0 || !(opted_in.load(std::memory_order_relaxed) & bit)) {
      TESSERA_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(Cfg::kSmemBytes)));
      opted_in.fetch_or(bit, std::memory_order_relaxed);
    }
  }
  if (p.meta.n_items == 0) return;
  fn<<<p.meta.n_items, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(p);
  TESSERA_CUDA_CHECK_LAUNCH();
}

template <class Cfg>
void launch_entry(KvVariant v, const AttentionParams& p, Stream stream) {
  switch (v) {
    case KvVariant::kSpan: launch_variant<Cfg, KvVariant::kSpan>(p, stream); break;
    case KvVariant::kSpanMasked: launch_variant<Cfg, KvVariant::kSpanMasked>(p, stream); break;
    case KvVariant::kPacked: launch_variant<Cfg, KvVariant::kPacked>(p, stream); break;
  }
}

}  // namespace tessera::kernels::mma
