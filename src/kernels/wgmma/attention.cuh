#pragma once
// The wgmma attention kernel template (sm_90a; FlashAttention-3's warp-specialized scheme on Tessera's plan
// contract): persistent CTAs (Config::kPersistent: CTA c runs work items c, c + gridDim.x, ...; the swapped tiles one
// CTA per item). Warpgroup 0 produces (producer.cuh: TMA loads of Q and of every entry's K and V
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
#include "kernels/work_item.cuh"

namespace tessera::kernels::wgmma {

template <class Cfg, KvVariant V>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks) attention_kernel(const __grid_constant__ KernelParams kp) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // 128-byte swizzle atoms need 1024-byte-aligned buffers (Config::kAlignSlack pays for the rounding).
  const std::uint32_t raw = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem_raw));
  unsigned char* smem = smem_raw + (((raw + 1023u) & ~1023u) - raw);
  const Barriers<Cfg> bar(smem);
  const AttentionParams& p = kp.p;
  // One CTA per item, or (persistent) every gridDim.x-th item from blockIdx.x on.
  const std::int32_t first = blockIdx.x, stride = Cfg::kPersistent ? gridDim.x : p.meta.n_items;
  if (threadIdx.x == 0) {
    bar.init();
    ptx::prefetch_tensor_map(&kp.q);
    ptx::prefetch_tensor_map(&kp.k);
    ptx::prefetch_tensor_map(&kp.v);
  }
  __syncthreads();
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    RingPositions<Cfg::S> pos;  // the producer's, kept across its items
    ptx::setmaxnreg_dec<Cfg::kProducerRegs>();
    if (threadIdx.x < 32 && ptx::elect_one())
      for (std::int32_t i = first; i < p.meta.n_items; i += stride)
        producer_loop<Cfg, V>(kp, work_item(p, i), smem, bar, pos);
  } else {
    ptx::setmaxnreg_inc<Cfg::kConsumerRegs>();
    if constexpr (Cfg::kSwapAB) {
      static_assert(!Cfg::kPersistent, "the swapped consumer runs one item per CTA");
      consumer_swap_loop<Cfg, V>(kp, work_item(p, first), smem, bar);
    } else {
      // A consumer warp's item index lives in static shared memory (an address known at link time) and is read
      // again for the epilogue, so that no register holds it across a mainloop (in a register, or as the address of
      // a dynamic slot, ptxas spilled it to local memory). Each warp has its own slot; its lanes store one value.
      __shared__ std::int32_t item_slots[Cfg::kConsumerWarps];
      volatile std::int32_t* const i = item_slots + (threadIdx.x / 32 - 4);
      RingPositions<Cfg::S> pos;
      const auto consume = [&] {
        if constexpr (kSkipForeignEntries<Cfg, V>) {
          if (p.block_q < Cfg::TQ) consumer_skip_loop<Cfg, V>(kp, i, smem, bar, wg - 1, pos);  // Coarsened-Q
          else consumer_loop<Cfg, V>(kp, i, smem, bar, wg - 1, pos);
        } else {
          consumer_loop<Cfg, V>(kp, i, smem, bar, wg - 1, pos);
        }
      };
      if constexpr (Cfg::kPersistent) {
        for (*i = first; *i < p.meta.n_items;) {
          consume();
          // Every lane reads the index before any lane stores the next one (the same value from every lane).
          __syncwarp();
          const std::int32_t next = *i + static_cast<std::int32_t>(gridDim.x);
          __syncwarp();
          *i = next;
        }
      } else {
        *i = first;
        consume();
      }
    }
  }
}

}  // namespace tessera::kernels::wgmma
