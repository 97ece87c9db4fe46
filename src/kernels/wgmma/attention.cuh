#pragma once
// The wgmma attention kernel template (sm_90a; FlashAttention-3's warp-specialized scheme on Tessera's plan
// contract): one CTA per WorkItem, or persistent CTAs that take items from the launch's list (scheduler.cuh).
// Warpgroup 0 produces (producer.cuh: TMA loads of Q and of every entry's K and V
// into the K and V rings), warpgroups 1.. consume (consumer.cuh: wgmma QK^T and PV, online softmax, epilogue; for
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
#include "kernels/wgmma/scheduler.cuh"
#include "kernels/work_item.cuh"

namespace tessera::kernels::wgmma {

/// kPersist: persistent CTAs (plans with persistent CTAs on entries with Config::kPersistent; scheduler.cuh), else
/// one CTA per work item.
template <class Cfg, KvVariant V, bool kPersist>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks) attention_kernel(const __grid_constant__ KernelParams kp) {
  static_assert(!kPersist || Cfg::kPersistent, "this tile runs one CTA per item");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // 128-byte swizzle atoms need 1024-byte-aligned buffers; the barriers go where SmemLayout puts them.
  const SmemLayout<Cfg> layout(smem_raw);
  unsigned char* smem = layout.operands;
  const Barriers<Cfg> bar(layout.small_region);
  const AttentionParams& p = kp.p;
  WorkItem it{};  // one CTA per item: the item, read before the set-up so that its latency hides behind it
  if constexpr (!kPersist) it = work_item(p, blockIdx.x);
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
    if constexpr (V == KvVariant::kPacked && !kPersist) {  // packed tiles of one item: the whole warp issues
      if (threadIdx.x < 32) {
        const int n = it.entry_end - it.entry_begin;
        if (n > 0) producer_item_packed_warp<Cfg>(kp, it, n, smem, bar, threadIdx.x);
      }
    } else if (threadIdx.x < 32 && ptx::elect_one()) {
      if constexpr (kPersist) producer_persistent<Cfg, V>(kp, smem, bar);
      else producer_loop<Cfg, V>(kp, it, smem, bar);
    }
  } else {
    ptx::setmaxnreg_inc<Cfg::kConsumerRegs>();
    if constexpr (Cfg::kSwapAB) {
      consumer_swap_loop<Cfg, V>(kp, it, smem, bar);
    } else {
      RingPositions<Cfg::S> pos;
      const auto consume = [&](const ItemRef<kPersist>& item) {
        if constexpr (kSkipForeignEntries<Cfg, V>) {
          if (p.block_q < Cfg::TQ) consumer_skip_loop<Cfg, V>(kp, item, smem, bar, wg - 1, pos);  // Coarsened-Q
          else consumer_loop<Cfg, V>(kp, item, smem, bar, wg - 1, pos);
        } else {
          consumer_loop<Cfg, V>(kp, item, smem, bar, wg - 1, pos);
        }
      };
      if constexpr (kPersist) {  // the items the producer announces in the item ring, until the end mark
        const volatile std::int32_t* const ring = bar.item_ring;
        for (;;) {
          const volatile std::int32_t* const slot = ring + pos.q_phase();
          consumer_wait(bar.q_full, 0, pos.q_phase());
          if (*slot >= p.meta.n_items) break;
          consume(ItemRef<true>{slot});
        }
      } else {
        consume(ItemRef<false>{it});
      }
    }
  }
}

}  // namespace tessera::kernels::wgmma
