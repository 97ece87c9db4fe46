#pragma once
// The mma.sync attention kernel template (FA2-style, sm_80 and later): one CTA per WorkItem; warps form a
// WQ x WKV grid (config.cuh): each owns MT slabs of 16 query rows and a slice of the kv columns of every tile.
// K tiles stream through S buffers, V through one (FA2's schedule: V(j) lands while QK^T and the softmax of tile
// j run, K(j+1) while PV runs); S = QK^T and O += PV on mma.sync m16n8k16 with P kept in registers; online
// softmax in exp2 units. Epilogue: O (input dtype) and LSE (natural log) directly, or a normalized fp32 partial
// (O, LSE) in the split-KV workspace slot WorkItem::partial; with WKV > 1 the warps' states are merged first.
#include <cuda_runtime.h>

#include "core/query_tiles.hpp"
#include "kernels/launch.hpp"
#include "kernels/mma/config.cuh"
#include "kernels/mma/fragments.cuh"
#include "kernels/mma/masking.cuh"
#include "kernels/mma/softmax.cuh"
#include "kernels/mma/tile_load.cuh"
#include "kernels/output.cuh"
#include "kernels/work_item.cuh"

namespace tessera::kernels::mma {

template <class Cfg, KvVariant V>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks) attention_kernel(const AttentionParams p) {
  using T = typename Cfg::Elem;
  constexpr bool kPacked = V == KvVariant::kPacked;
  constexpr bool kMembership = V != KvVariant::kSpan;
  constexpr int S = Cfg::S;
  constexpr int SV = Cfg::kVBuffers;
  extern __shared__ __align__(128) unsigned char smem[];
  const std::uint32_t sq = ptx::smem_addr(smem);
  const std::uint32_t sk0 = sq + Cfg::kQBytes;
  const std::uint32_t sv0 = sk0 + S * Cfg::kKvBytes;
  int* slot_blk = reinterpret_cast<int*>(smem + Cfg::kQBytes + (S + SV) * Cfg::kKvBytes);
  int* slot_cnt = slot_blk + S * Cfg::kMaxSlots;

  const WorkItem it = work_item(p, blockIdx.x);
  const int kv_head = it.head / (p.h_q / p.h_kv);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warp_kv = warp / Cfg::WQ;
  const int row0 = (warp % Cfg::WQ) * Cfg::kRowsPerWarp;
  const int col0 = warp_kv * Cfg::kColsPerWarp;
  const int n_entries = it.entry_end - it.entry_begin;
  const int log2_bkv = kPacked ? __ffs(p.block_kv) - 1 : 0;
  const T* kb = static_cast<const T*>(p.k) + it.batch * p.k_stride_b + kv_head * p.k_stride_h;
  const T* vb = static_cast<const T*>(p.v) + it.batch * p.v_stride_b + kv_head * p.v_stride_h;

  MaskLayout<Cfg> ml;
  if constexpr (kMembership) {
    ml.init(row0, col0, lane, min(p.block_q, Cfg::TQ), kPacked ? p.block_kv : min(p.block_kv, Cfg::TKV));
  } else {
    ml.init(row0, col0, lane, Cfg::TQ, Cfg::TKV);
  }

  // Prologue: Q with K(0), then K(1) .. K(S-2), one commit group each (empty groups keep the count uniform).
  load_q<Cfg>(sq, p, it);
  constexpr int kPre = S > 1 ? S - 1 : 1;
#pragma unroll
  for (int j = 0; j < kPre; ++j) {
    if (j < n_entries) {
      const KvTileSource src = kv_source<Cfg, kPacked>(p, it.entry_begin + j, slot_blk + j * Cfg::kMaxSlots,
                                                       slot_cnt + j * Cfg::kMaxSlots);
      load_kv_rows<Cfg, kPacked>(sk0 + j * Cfg::kKvBytes, kb, p.k_stride_n, src, p, log2_bkv);
      if constexpr (SV > 1) load_kv_rows<Cfg, kPacked>(sv0 + j * Cfg::kKvBytes, vb, p.v_stride_n, src, p, log2_bkv);
    }
    ptx::cp_async_commit();
  }

  float o[Cfg::MT][Cfg::DT][4];
#pragma unroll
  for (int m = 0; m < Cfg::MT; ++m)
#pragma unroll
    for (int d = 0; d < Cfg::DT; ++d)
#pragma unroll
      for (int i = 0; i < 4; ++i) o[m][d][i] = 0.f;
  RowState<Cfg> st;
  st.init();
  const float scale_log2 = p.scale * 1.4426950408889634f;

  for (int j = 0; j < n_entries; ++j) {
    const int e = it.entry_begin + j;
    const int b = j % S;
    // K(j) (with V(j) when SV > 1) has landed: every group but the S - 2 newest is complete; the barrier also
    // retires PV(j-1)'s reads of its V buffer and QK(j-1)'s reads of K buffer (j-1) % S.
    ptx::cp_async_wait<(S >= 2 ? S - 2 : 0)>();
    __syncthreads();
    if constexpr (SV == 1) {
      KvTileSource src{0, slot_blk + b * Cfg::kMaxSlots};  // packed: the slot blocks recorded with K(j)
      if constexpr (!kPacked) src.kv0 = __ldg(p.meta.kv_tile + e) * Cfg::TKV;
      load_kv_rows<Cfg, kPacked>(sv0, vb, p.v_stride_n, src, p, log2_bkv);
      ptx::cp_async_commit();
    }
    if constexpr (S >= 2) {
      const int jn = j + S - 1;
      if (jn < n_entries) {
        const int bn = jn % S;
        const KvTileSource src = kv_source<Cfg, kPacked>(p, it.entry_begin + jn, slot_blk + bn * Cfg::kMaxSlots,
                                                         slot_cnt + bn * Cfg::kMaxSlots);
        load_kv_rows<Cfg, kPacked>(sk0 + bn * Cfg::kKvBytes, kb, p.k_stride_n, src, p, log2_bkv);
        if constexpr (SV > 1) load_kv_rows<Cfg, kPacked>(sv0 + bn * Cfg::kKvBytes, vb, p.v_stride_n, src, p, log2_bkv);
      }
      ptx::cp_async_commit();
    }
    float s[Cfg::MT][Cfg::NT][4];
    qk_scores<Cfg>(s, sq, sk0 + b * Cfg::kKvBytes, row0, col0, lane);

    // Masking decision (uniform over the CTA).
    std::uint64_t mb = ~0ull;
    if (kMembership && p.meta.member != nullptr) mb = member_bits(p.meta.member, p.meta.member_bytes, e);
    int kv_limit = Cfg::TKV;
    bool ragged_slots = false;
    const int* cnt = slot_cnt + b * Cfg::kMaxSlots;
    if constexpr (kPacked) {
      std::uint32_t valid = 0;
#pragma unroll
      for (int k = 0; k < Cfg::kMaxSlots; ++k) {
        valid |= (cnt[k] > 0 ? 1u : 0u) << k;
        ragged_slots |= cnt[k] > 0 && cnt[k] < p.block_kv;
      }
      std::uint64_t rep = 0;
#pragma unroll
      for (int k = 0; k < 8; ++k) rep |= std::uint64_t(valid) << (8 * k);
      mb &= rep;
    } else {
      kv_limit = min(Cfg::TKV, p.n_kv - __ldg(p.meta.kv_tile + e) * Cfg::TKV);
    }
    const bool need_mask = ((mb & ml.full) != ml.full) || kv_limit < Cfg::TKV || ragged_slots;
    if (need_mask) apply_mask<Cfg>(s, ml, mb, kv_limit, cnt, log2_bkv, ragged_slots, lane);

    online_softmax<Cfg>(s, o, st, scale_log2);

    if constexpr (SV == 1) {
      // V(j) has landed (only K(j+S-1) may still be in flight); the barrier also retires QK(j)'s reads of K.
      ptx::cp_async_wait<(S >= 2 ? 1 : 0)>();
      __syncthreads();
    }
    if constexpr (S == 1) {
      if (j + 1 < n_entries) {
        const KvTileSource src = kv_source<Cfg, kPacked>(p, e + 1, slot_blk, slot_cnt);
        load_kv_rows<Cfg, kPacked>(sk0, kb, p.k_stride_n, src, p, log2_bkv);
      }
      ptx::cp_async_commit();
    }
    pv_accumulate<Cfg>(o, s, sv0 + (SV > 1 ? b : 0) * Cfg::kKvBytes, col0, lane);
  }
  ptx::cp_async_wait<0>();

  // Epilogue.
  const int g = lane >> 2, t2 = 2 * (lane & 3);
  if constexpr (Cfg::WKV == 1) {
#pragma unroll
    for (int m = 0; m < Cfg::MT; ++m) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float l = st.l[m][h];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const int r = row0 + m * 16 + g + 8 * h;
        if (r >= it.q_len) continue;
        const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
        for (int d = 0; d < Cfg::DT; ++d) store_pair<Cfg>(p, it, r, d * 8 + t2, o[m][d][2 * h] * inv, o[m][d][2 * h + 1] * inv);
        if ((lane & 3) == 0)
          store_lse<Cfg>(p, it, r, l > 0.f ? (st.m[m][h] + __log2f(l)) * 0.6931471805599453f : -INFINITY);
      }
    }
  } else {
    // Merge the WKV warps' (m, l, O) states of each row through shared memory (reusing the tile buffers).
    float* fo = reinterpret_cast<float*>(smem);
    float* fm = fo + Cfg::WKV * Cfg::TQ * Cfg::kMergeStride;
    float* fl = fm + Cfg::WKV * Cfg::TQ;
    __syncthreads();  // every warp is done reading Q/K/V
#pragma unroll
    for (int m = 0; m < Cfg::MT; ++m) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float l = st.l[m][h];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const int r = row0 + m * 16 + g + 8 * h;
        const int w = warp_kv * Cfg::TQ + r;
        if ((lane & 3) == 0) fm[w] = st.m[m][h], fl[w] = l;
#pragma unroll
        for (int d = 0; d < Cfg::DT; ++d)
          *reinterpret_cast<float2*>(fo + w * Cfg::kMergeStride + d * 8 + t2) = make_float2(o[m][d][2 * h], o[m][d][2 * h + 1]);
      }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < Cfg::TQ * (Cfg::D / 2); i += Cfg::kThreads) {
      const int r = i / (Cfg::D / 2), c = 2 * (i % (Cfg::D / 2));
      if (r >= it.q_len) continue;
      float mx = -INFINITY;
#pragma unroll
      for (int w = 0; w < Cfg::WKV; ++w) mx = fmaxf(mx, fm[w * Cfg::TQ + r]);
      float l = 0.f, x = 0.f, y = 0.f;
#pragma unroll
      for (int w = 0; w < Cfg::WKV; ++w) {
        const float mw = fm[w * Cfg::TQ + r];
        const float sc = mw == -INFINITY ? 0.f : ptx::exp2_approx(mw - mx);
        const float2 ow = *reinterpret_cast<const float2*>(fo + (w * Cfg::TQ + r) * Cfg::kMergeStride + c);
        l += fl[w * Cfg::TQ + r] * sc;
        x += ow.x * sc;
        y += ow.y * sc;
      }
      const float inv = l > 0.f ? 1.f / l : 0.f;
      store_pair<Cfg>(p, it, r, c, x * inv, y * inv);
      if (c == 0) store_lse<Cfg>(p, it, r, l > 0.f ? (mx + __log2f(l)) * 0.6931471805599453f : -INFINITY);
    }
  }
}

}  // namespace tessera::kernels::mma
