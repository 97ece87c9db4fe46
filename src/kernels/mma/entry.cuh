#pragma once
// Host launcher of one catalog entry (included by the generated per-entry translation units): instantiates
// the entry's three kernel variants and launches the one asked for.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "core/tile_metadata.hpp"
#include "cuda/check.cuh"
#include "kernels/entry_common.cuh"
#include "kernels/launch.hpp"
#include "kernels/mma/attention.cuh"

namespace tessera::kernels::mma {

template <class Cfg, KvVariant V>
void launch_variant(const AttentionParams& p, Stream stream) {
  auto* fn = &attention_kernel<Cfg, V>;
  if constexpr (Cfg::kSmemBytes > 48 * 1024) {
    static std::atomic<std::uint64_t> opted_in{0};
    opt_in_smem_once(reinterpret_cast<const void*>(fn), int(Cfg::kSmemBytes), opted_in);
  }
  if (p.meta.n_items == 0) return;
  fn<<<p.meta.n_items, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(p);
  TESSERA_CUDA_CHECK_LAUNCH();
}

template <class Cfg>
void launch_entry(KvVariant v, const AttentionParams& p, Stream stream) {
  with_variant(v, [&](auto variant) { launch_variant<Cfg, decltype(variant)::value>(p, stream); });
}

}  // namespace tessera::kernels::mma
