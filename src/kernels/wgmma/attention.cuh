#pragma once
// The wgmma attention kernel template (sm_90a; FlashAttention-3's warp-specialized scheme on Tessera's plan
// contract): one CTA per WorkItem. Warpgroup 0 produces (producer.cuh: TMA loads of Q and of every entry's K and V
// into S-stage rings), warpgroups 1.. consume (consumer.cuh: wgmma QK^T and PV, online softmax, epilogue; for
// Coarsened-Q tiles of two warpgroups consumer_skip.cuh, which skips a warpgroup's foreign entries; for 16- and
// 32-row query tiles consumer_swap.cuh: the transposed products S^T = K Q^T and O^T += V^T P^T).
// Config (config.cuh) fixes the shapes and the register split; pipeline.cuh holds the barriers.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/query_tiles.hpp"
#include "kernels/ptx/tma.cuh"
#include "kernels/ptx/wgmma.cuh"
#include "kernels/wgmma/config.cuh"
#include "kernels/wgmma/consumer.cuh"
#include "kernels/wgmma/consumer_skip.cuh"
#include "kernels/wgmma/consumer_swap.cuh"
#include "kernels/wgmma/params.cuh"
#include "kernels/wgmma/pipeline.cuh"
#include "kernels/wgmma/producer.cuh"

namespace tessera::kernels::wgmma {

template <class Cfg, KvVariant V>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks) attention_kernel(const __grid_constant__ KernelParams kp) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // 128-byte swizzle atoms need 1024-byte-aligned buffers (Config::kAlignSlack pays for the rounding).
  const std::uint32_t raw = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem_raw));
  unsigned char* smem = smem_raw + (((raw + 1023u) & ~1023u) - raw);
  const Barriers<Cfg> bar(smem);
  const AttentionParams& p = kp.p;
  const WorkItem it = p.meta.implicit_items
                          ? unsplit_item(p.meta.query_geometry, p.meta.tile_row_offsets, p.meta.tile_row_ends, blockIdx.x)
                          : p.meta.items[blockIdx.x];
  if (threadIdx.x == 0) {
    bar.init();
    ptx::prefetch_tensor_map(&kp.q);
    ptx::prefetch_tensor_map(&kp.k);
    ptx::prefetch_tensor_map(&kp.v);
  }
  __syncthreads();
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    ptx::setmaxnreg_dec<Cfg::kProducerRegs>();
    if (threadIdx.x < 32 && ptx::elect_one()) producer_loop<Cfg, V>(kp, it, smem, bar);
  } else {
    ptx::setmaxnreg_inc<Cfg::kConsumerRegs>();
    if constexpr (Cfg::kSwapAB) {
      consumer_swap_loop<Cfg, V>(kp, it, smem, bar);
    } else if constexpr (kSkipForeignEntries<Cfg, V>) {
      if (p.block_q < Cfg::TQ) consumer_skip_loop<Cfg, V>(kp, it, smem, bar, wg - 1);  // Coarsened-Q
      else consumer_loop<Cfg, V>(kp, it, smem, bar, wg - 1);
    } else {
      consumer_loop<Cfg, V>(kp, it, smem, bar, wg - 1);
    }
  }
}

}  // namespace tessera::kernels::wgmma
