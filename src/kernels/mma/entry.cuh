#pragma once
// Host launcher of one catalog entry (included by the generated per-entry translation units): instantiates
// the entry's three kernel variants and launches the one asked for.
#include <cuda_runtime.h>

#include "core/tile_metadata.hpp"
#include "cuda/check.cuh"
#include "kernels/launch.hpp"
#include "kernels/mma/attention.cuh"

namespace tessera::kernels::mma {

template <class Cfg, KvVariant V>
void launch_variant(const AttentionParams& p, Stream stream) {
  auto* fn = &attention_kernel<Cfg, V>;
  if (Cfg::kSmemBytes > 48 * 1024)
    TESSERA_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(Cfg::kSmemBytes)));
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
