#pragma once
// The mma.sync attention kernel template (FA2-style, sm_80 and later): one CTA per WorkItem; each warp owns
// MT slabs of 16 query rows; K/V tiles stream through an S-stage cp.async pipeline into swizzled shared
// memory; S = QK^T and O += PV on mma.sync m16n8k16 with P kept in registers; online softmax in exp2 units.
// Epilogue: O (input dtype) and LSE (natural log) directly, or a normalized fp32 partial (O, LSE) in the
// split-KV workspace slot WorkItem::partial.
#include <cuda_runtime.h>

#include "kernels/launch.hpp"
#include "kernels/mma/config.cuh"
#include "kernels/mma/fragments.cuh"
#include "kernels/mma/masking.cuh"
#include "kernels/mma/softmax.cuh"
#include "kernels/mma/tile_load.cuh"

namespace tessera::kernels::mma {

template <class Cfg, KvVariant V>
__global__ void __launch_bounds__(Cfg::kThreads) attention_kernel(const AttentionParams p) {
  using T = typename Cfg::Elem;
  constexpr bool kPacked = V == KvVariant::kPacked;
  constexpr bool kMembership = V != KvVariant::kSpan;
  extern __shared__ __align__(128) unsigned char smem[];
  const std::uint32_t sq = ptx::smem_addr(smem);
  const std::uint32_t sk0 = sq + Cfg::kQBytes;
  const std::uint32_t sv0 = sk0 + Cfg::S * Cfg::kKvBytes;
  int* slot_blk = reinterpret_cast<int*>(smem + Cfg::kQBytes + 2 * Cfg::S * Cfg::kKvBytes);
  int* slot_cnt = slot_blk + Cfg::S * Cfg::kMaxSlots;

  const WorkItem it = p.meta.items[blockIdx.x];
  const int kv_head = it.head / (p.h_q / p.h_kv);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int row0 = warp * Cfg::kRowsPerWarp;
  const int n_entries = it.entry_end - it.entry_begin;

  MaskLayout<Cfg> ml;
  if constexpr (kMembership) {
    ml.init(row0, lane, min(p.block_q, Cfg::TQ), kPacked ? p.block_kv : min(p.block_kv, Cfg::TKV));
  } else {
    ml.init(row0, lane, Cfg::TQ, Cfg::TKV);
  }

  // Prologue: Q with tile 0, then tiles 1 .. S-2, one commit group each (empty groups keep the count uniform).
  load_q<Cfg>(sq, p, it);
#pragma unroll
  for (int j = 0; j < Cfg::S - 1; ++j) {
    if (j < n_entries)
      load_kv<Cfg, kPacked>(sk0 + j * Cfg::kKvBytes, sv0 + j * Cfg::kKvBytes, slot_blk + j * Cfg::kMaxSlots,
                            slot_cnt + j * Cfg::kMaxSlots, p, it, kv_head, it.entry_begin + j);
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
    ptx::cp_async_wait<Cfg::S - 2>();
    __syncthreads();
    {  // refill the buffer consumed in iteration j-1
      const int jn = j + Cfg::S - 1;
      if (jn < n_entries) {
        const int b = jn % Cfg::S;
        load_kv<Cfg, kPacked>(sk0 + b * Cfg::kKvBytes, sv0 + b * Cfg::kKvBytes, slot_blk + b * Cfg::kMaxSlots,
                              slot_cnt + b * Cfg::kMaxSlots, p, it, kv_head, it.entry_begin + jn);
      }
      ptx::cp_async_commit();
    }
    const int b = j % Cfg::S;
    const int e = it.entry_begin + j;
    float s[Cfg::MT][Cfg::NT][4];
    qk_scores<Cfg>(s, sq, sk0 + b * Cfg::kKvBytes, row0, lane);

    // Masking decision (uniform over the CTA).
    std::uint64_t mb = ~0ull;
    if (kMembership && p.meta.member != nullptr) mb = __ldg(p.meta.member + e);
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
    if (need_mask) apply_mask<Cfg>(s, ml, mb, kv_limit, cnt, p.block_kv, ragged_slots, lane);

    online_softmax<Cfg>(s, o, st, scale_log2);
    pv_accumulate<Cfg>(o, s, sv0 + b * Cfg::kKvBytes, lane);
  }
  ptx::cp_async_wait<0>();

  // Epilogue.
  const int g = lane >> 2, t2 = 2 * (lane & 3);
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
      const float lse = l > 0.f ? (st.m[m][h] + __log2f(l)) * 0.6931471805599453f : -INFINITY;
      if (it.partial < 0) {
        T* orow = static_cast<T*>(p.o) + it.batch * p.o_stride_b + std::int64_t(it.q_start + r) * p.o_stride_n +
                  it.head * p.o_stride_h;
#pragma unroll
        for (int d = 0; d < Cfg::DT; ++d)
          *reinterpret_cast<std::uint32_t*>(orow + d * 8 + t2) =
              ptx::pack2<T>(o[m][d][2 * h] * inv, o[m][d][2 * h + 1] * inv);
        if (p.lse != nullptr && (lane & 3) == 0)
          p.lse[it.batch * p.lse_stride_b + it.head * p.lse_stride_h + it.q_start + r] = lse;
      } else {
        float* orow = p.o_partial + (std::int64_t(it.partial) * Cfg::TQ + r) * Cfg::D;
#pragma unroll
        for (int d = 0; d < Cfg::DT; ++d)
          *reinterpret_cast<float2*>(orow + d * 8 + t2) = make_float2(o[m][d][2 * h] * inv, o[m][d][2 * h + 1] * inv);
        if ((lane & 3) == 0) p.lse_partial[std::int64_t(it.partial) * Cfg::TQ + r] = lse;
      }
    }
  }
}

}  // namespace tessera::kernels::mma
