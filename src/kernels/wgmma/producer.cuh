#pragma once
// The producer role: one elected thread of warpgroup 0 loads Q once and, for every entry (KV tile) of the work item
// in list order, K into the next stage of the K ring and V into the next stage of the V ring, by TMA.
//   span entry e:   the tile's rows start at kv_tile[e] * T_KV (one box of T_KV rows per 64-column panel);
//   packed entry e: slot j (j < c_kv) holds logical block gather_blocks[e * c_kv + j], B_KV rows at row j * B_KV of
//                   the stage (one box per slot and panel; B_KV is a multiple of 16, so every slot starts on a
//                   1024-byte swizzle atom). An empty slot (-1) loads the box at row N_kv, wholly past the end:
//                   zeros that still complete their bytes, so P (= 0) * V never meets stale shared memory.
#include <cstdint>

#include "core/tile_metadata.hpp"
#include "kernels/ptx/tma.cuh"
#include "kernels/wgmma/params.cuh"
#include "kernels/wgmma/pipeline.cuh"

namespace tessera::kernels::wgmma {

/// Loads entry e's K or V tile (map: kp.k or kp.v) into the stage at `dst`, completing on `bar`.
template <class Cfg, KvVariant V>
__device__ __forceinline__ void load_kv_tile(const AttentionParams& p, const CUtensorMap* map, unsigned char* dst,
                                             std::int64_t e, int kv_head, int batch, std::uint64_t* bar) {
  if constexpr (V == KvVariant::kPacked) {
    const int c = p.meta.c_kv_gather;
    for (int j = 0; j < c; ++j) {
      const int g = __ldg(p.meta.gather_blocks + e * c + j);
      const int row = g >= 0 ? g * p.block_kv : p.n_kv;
#pragma unroll
      for (int panel = 0; panel < Cfg::kPanels; ++panel)
        ptx::tma_load_4d(dst + panel * Cfg::kKvPanelBytes + std::size_t(j) * p.block_kv * Cfg::kRowBytes, map,
                         panel * 64, row, kv_head, batch, bar);
    }
  } else {
    const int row = __ldg(p.meta.kv_tile + e) * Cfg::TKV;
#pragma unroll
    for (int panel = 0; panel < Cfg::kPanels; ++panel)
      ptx::tma_load_4d(dst + panel * Cfg::kKvPanelBytes, map, panel * 64, row, kv_head, batch, bar);
  }
}

/// The producer's whole work for item `it` (one thread).
template <class Cfg, KvVariant V>
__device__ __forceinline__ void producer_loop(const KernelParams& kp, const WorkItem& it, unsigned char* smem,
                                              const Barriers<Cfg>& bar) {
  const AttentionParams& p = kp.p;
  const int n = it.entry_end - it.entry_begin;
  if (n <= 0) return;  // empty row: the consumers write O = 0, LSE = -inf without waiting
  const int kv_head = it.head / (p.h_q / p.h_kv);
  ptx::mbarrier_arrive_expect_tx(bar.q_full, Cfg::kQBytes);
#pragma unroll
  for (int panel = 0; panel < Cfg::kPanels; ++panel)
    ptx::tma_load_4d(smem + Cfg::kQOffset + panel * Cfg::kQPanelBytes, &kp.q, panel * 64, it.q_start, it.head,
                     it.batch, bar.q_full);
  PipelineState<Cfg::S> w;
  for (int j = 0; j < n; ++j, w.advance()) {
    const std::int64_t e = it.entry_begin + j;
    producer_acquire(bar.k_empty, bar.k_full, w.stage, w.phase, Cfg::kKvBytes);
    load_kv_tile<Cfg, V>(p, &kp.k, smem + Cfg::kKOffset + w.stage * Cfg::kKvBytes, e, kv_head, it.batch,
                         bar.k_full + w.stage);
    producer_acquire(bar.v_empty, bar.v_full, w.stage, w.phase, Cfg::kKvBytes);
    load_kv_tile<Cfg, V>(p, &kp.v, smem + Cfg::kVOffset + w.stage * Cfg::kKvBytes, e, kv_head, it.batch,
                         bar.v_full + w.stage);
  }
}

}  // namespace tessera::kernels::wgmma
