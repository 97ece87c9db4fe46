#pragma once
// The producer role: one elected thread of warpgroup 0 (for packed tiles of one item per CTA: its whole first warp,
// producer_item_packed_warp) loads Q once per work item and, for every entry (KV tile) of the item in list order, K
// into the next stage of the K ring and V into the next stage of the V ring, by TMA. A persistent CTA's producer also
// takes the items (scheduler.cuh) and announces them to the consumers.
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
#include "kernels/wgmma/scheduler.cuh"
#include "kernels/work_item.cuh"

namespace tessera::kernels::wgmma {

/// The first token of a packed slot holding logical kv block g, or N_kv for an empty slot (g < 0): a box wholly past
/// the end, zero-filled, that still completes its bytes.
__device__ __forceinline__ int slot_first_row(const AttentionParams& p, int g) { return g >= 0 ? g * p.block_kv : p.n_kv; }

/// Issues the TMA boxes (one per 64-column panel) of packed slot j, B_KV rows from token `row`, into the stage at
/// `dst` (slot j at row j * B_KV of each panel), completing on `bar`.
template <class Cfg>
__device__ __forceinline__ void issue_slot(const AttentionParams& p, const CUtensorMap* map, unsigned char* dst, int j,
                                           int row, int kv_head, int batch, std::uint64_t* bar) {
#pragma unroll
  for (int panel = 0; panel < Cfg::kPanels; ++panel)
    ptx::tma_load_4d(dst + panel * Cfg::kKvPanelBytes + std::size_t(j) * p.block_kv * Cfg::kRowBytes, map, panel * 64,
                     row, kv_head, batch, bar);
}

/// Arms the Q buffer's full barrier and issues the item's Q boxes (one thread).
template <class Cfg>
__device__ __forceinline__ void issue_q(const KernelParams& kp, const WorkItem& it, unsigned char* smem,
                                        const Barriers<Cfg>& bar) {
  ptx::mbarrier_arrive_expect_tx(bar.q_full, Cfg::kQBytes);
#pragma unroll
  for (int panel = 0; panel < Cfg::kPanels; ++panel)
    ptx::tma_load_4d(smem + Cfg::kQOffset + panel * Cfg::kQPanelBytes, &kp.q, panel * 64, it.q_start, it.head,
                     it.batch, bar.q_full);
}

/// Where the rows of one entry's KV tile start: span: rows[0] = kv_tile[e] * T_KV; packed: rows[j] = the first
/// token of slot j's logical block, or N_kv for an empty slot (j < c_kv).
template <class Cfg, KvVariant V>
struct TileRows {
  static constexpr int kSlots = V == KvVariant::kPacked ? Cfg::kMaxSlots : 1;
  int rows[kSlots];

  /// Reads entry e's metadata (global loads; issued one entry ahead of their use so their latency hides behind the
  /// wait for a free stage).
  __device__ __forceinline__ void load(const AttentionParams& p, std::int64_t e) {
    if constexpr (V == KvVariant::kPacked) {
      const int c = p.meta.c_kv_gather;
#pragma unroll
      for (int j = 0; j < kSlots; ++j) {
        rows[j] = slot_first_row(p, j < c ? __ldg(p.meta.gather_blocks + e * c + j) : -1);
      }
    } else {
      rows[0] = __ldg(p.meta.kv_tile + e) * Cfg::TKV;
    }
  }

  /// Issues the TMA loads of the tile (map: kp.k or kp.v) into the stage at `dst`, completing on `bar`.
  __device__ __forceinline__ void issue(const AttentionParams& p, const CUtensorMap* map, unsigned char* dst,
                                        int kv_head, int batch, std::uint64_t* bar) const {
    if constexpr (V == KvVariant::kPacked) {
      const int c = p.meta.c_kv_gather;
#pragma unroll
      for (int j = 0; j < kSlots; ++j) {
        if (j >= c) break;
        issue_slot<Cfg>(p, map, dst, j, rows[j], kv_head, batch, bar);
      }
    } else {
#pragma unroll
      for (int panel = 0; panel < Cfg::kPanels; ++panel)
        ptx::tma_load_4d(dst + panel * Cfg::kKvPanelBytes, map, panel * 64, rows[0], kv_head, batch, bar);
    }
  }
};

/// The producer's loads for item `it` of n > 0 entries (one thread), from ring positions `pos`: Q (arming the Q
/// buffer's full barrier), then K and V of every entry.
template <class Cfg, KvVariant V>
__device__ __forceinline__ void producer_item(const KernelParams& kp, const WorkItem& it, int n, unsigned char* smem,
                                              const Barriers<Cfg>& bar, const RingPositions<Cfg::S>& pos) {
  const AttentionParams& p = kp.p;
  const int kv_head = it.head / (p.h_q / p.h_kv);
  TileRows<Cfg, V> cur, next;
  cur.load(p, it.entry_begin);
  issue_q<Cfg>(kp, it, smem, bar);
  PipelineState<Cfg::S> wk = pos.ring();
  PipelineState<Cfg::kVStages> wv = pos.template ring<Cfg::kVStages>();
  for (int j = 0; j < n; ++j, wk.advance(), wv.advance()) {
    if (j + 1 < n) next.load(p, it.entry_begin + j + 1);
    producer_acquire(bar.k_empty, bar.k_full, wk.stage, wk.phase, Cfg::kKvBytes);
    cur.issue(p, &kp.k, smem + Cfg::kKOffset + wk.stage * Cfg::kKvBytes, kv_head, it.batch, bar.k_full + wk.stage);
    producer_acquire(bar.v_empty, bar.v_full, wv.stage, wv.phase, Cfg::kKvBytes);
    cur.issue(p, &kp.v, smem + Cfg::kVOffset + wv.stage * Cfg::kKvBytes, kv_head, it.batch, bar.v_full + wv.stage);
    cur = next;
  }
}

/// The packed tiles' producer for one item of n > 0 entries, run by the whole producer warp (lane: 0-31): lane j <
/// c_kv loads slot j's row and issues that slot's boxes, so that the c_kv x kPanels boxes of a stage go out from up to
/// 8 threads at once; lane 0 issues Q and arms each full barrier before the warp's boxes (__syncwarp). One thread issues
/// boxes at a fixed rate: on the H200 a thread of one CTA per SM moves 3.5 TB/s in 2 KB boxes (16 rows) and 5.9 in
/// 4 KB boxes, against 9.2 TB/s from L2 with enough threads (bench_l2_tma, bench/NOTES.md session 22). The order is
/// the single thread's: K(j) before V(j), each after its stage's release.
template <class Cfg>
__device__ __forceinline__ void producer_item_packed_warp(const KernelParams& kp, const WorkItem& it, int n,
                                                          unsigned char* smem, const Barriers<Cfg>& bar, int lane) {
  static_assert(Cfg::kMaxSlots <= 32, "one lane per packed slot");
  const AttentionParams& p = kp.p;
  const int kv_head = it.head / (p.h_q / p.h_kv), c = p.meta.c_kv_gather;
  const bool mine = lane < c;
  // This lane's slot row of entry e (as TileRows::load does for every slot).
  const auto slot_row = [&](std::int64_t e) {
    return slot_first_row(p, mine ? __ldg(p.meta.gather_blocks + e * c + lane) : -1);
  };
  const auto issue = [&](const CUtensorMap* map, unsigned char* dst, int row, std::uint64_t* full) {
    if (mine) issue_slot<Cfg>(p, map, dst, lane, row, kv_head, it.batch, full);
  };
  int cur = slot_row(it.entry_begin);
  if (lane == 0) issue_q<Cfg>(kp, it, smem, bar);
  PipelineState<Cfg::S> wk;
  PipelineState<Cfg::kVStages> wv;
  for (int j = 0; j < n; ++j, wk.advance(), wv.advance()) {
    const int next = j + 1 < n ? slot_row(it.entry_begin + j + 1) : 0;
    ptx::mbarrier_wait(bar.k_empty + wk.stage, wk.phase ^ 1u);
    if (lane == 0) ptx::mbarrier_arrive_expect_tx(bar.k_full + wk.stage, Cfg::kKvBytes);
    // Load-bearing: no lane runs ahead of another by a stage use, so lanes without a slot (lane >= c_kv) can never
    // wait on an empty barrier's parity one phase late (aliasing); and the barrier is armed before any box lands.
    __syncwarp();
    issue(&kp.k, smem + Cfg::kKOffset + wk.stage * Cfg::kKvBytes, cur, bar.k_full + wk.stage);
    ptx::mbarrier_wait(bar.v_empty + wv.stage, wv.phase ^ 1u);
    if (lane == 0) ptx::mbarrier_arrive_expect_tx(bar.v_full + wv.stage, Cfg::kKvBytes);
    __syncwarp();
    issue(&kp.v, smem + Cfg::kVOffset + wv.stage * Cfg::kKvBytes, cur, bar.v_full + wv.stage);
    cur = next;
  }
}

/// The producer's whole work for the CTA's one item `it` (one thread).
template <class Cfg, KvVariant V>
__device__ __forceinline__ void producer_loop(const KernelParams& kp, const WorkItem& it, unsigned char* smem,
                                              const Barriers<Cfg>& bar) {
  const int n = it.entry_end - it.entry_begin;
  if (n <= 0) return;  // empty row: the consumers write O = 0, LSE = -inf without waiting
  producer_item<Cfg, V>(kp, it, n, smem, bar, RingPositions<Cfg::S>{});
}

/// The producer's whole work in a persistent CTA (one thread; scheduler.cuh): item blockIdx.x, then one item per
/// ticket until the list is done. Each item, the end included, is announced in the item ring once every consumer
/// warp has released the previous item's Q; an empty item or the end arrives on the Q buffer's full barrier without
/// loading anything. The next ticket is taken once the item's loads are issued (the consumers then still have about
/// S tiles of it to compute, which hide the ticket's round trip), so a CTA claims an item only when it is ready to
/// load it: claimed early, items would wait behind the current one while another CTA runs dry at the end.
template <class Cfg, KvVariant V>
__device__ __forceinline__ void producer_persistent(const KernelParams& kp, unsigned char* smem,
                                                    const Barriers<Cfg>& bar) {
  static_assert(Cfg::kPersistent);
  const AttentionParams& p = kp.p;
  volatile std::int32_t* const ring = bar.item_ring;
  RingPositions<Cfg::S> pos;
  for (std::int32_t i = blockIdx.x;; i = take_ticket(p.meta.item_counter)) {
    const bool end = i >= p.meta.n_items;
    ptx::mbarrier_wait(bar.q_empty, pos.q_phase() ^ 1u);
    ring[pos.q_phase()] = i;
    int n = 0;
    if (!end) {
      const WorkItem it = work_item(p, i);
      n = it.entry_end - it.entry_begin;
      if (n > 0) producer_item<Cfg, V>(kp, it, n, smem, bar, pos);
    }
    if (n <= 0) ptx::mbarrier_arrive(bar.q_full);
    if (end) break;
    pos.advance(n);
  }
}

}  // namespace tessera::kernels::wgmma
