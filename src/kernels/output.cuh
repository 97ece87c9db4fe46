#pragma once
// Output stores shared by the attention kernel families: one finished (normalized) row pair of O, in the input dtype
// or as an fp32 split-KV partial, and the row's LSE (natural log; -inf for an empty row). Cfg provides Elem (the
// input dtype), TQ and D.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/launch.hpp"
#include "kernels/ptx/mma.cuh"

namespace tessera::kernels {

/// Writes columns c, c+1 of row r of item `it`'s tile (already normalized) to O, or to the split-KV partial slot
/// it.partial ([T_Q, D] fp32) when it.partial >= 0.
template <class Cfg>
__device__ __forceinline__ void store_pair(const AttentionParams& p, const WorkItem& it, int r, int c, float x,
                                           float y) {
  using T = typename Cfg::Elem;
  if (it.partial < 0) {
    T* orow = static_cast<T*>(p.o) + it.batch * p.o_stride_b + std::int64_t(it.q_start + r) * p.o_stride_n +
              it.head * p.o_stride_h;
    *reinterpret_cast<std::uint32_t*>(orow + c) = ptx::pack2<T>(x, y);
  } else {
    float* orow = p.o_partial + (std::int64_t(it.partial) * Cfg::TQ + r) * Cfg::D;
    *reinterpret_cast<float2*>(orow + c) = make_float2(x, y);
  }
}

/// Writes LSE (natural log) of row r of item `it`'s tile to p.lse (when set) or to the partial slot.
template <class Cfg>
__device__ __forceinline__ void store_lse(const AttentionParams& p, const WorkItem& it, int r, float lse) {
  if (it.partial < 0) {
    if (p.lse != nullptr) p.lse[it.batch * p.lse_stride_b + it.head * p.lse_stride_h + it.q_start + r] = lse;
  } else {
    p.lse_partial[std::int64_t(it.partial) * Cfg::TQ + r] = lse;
  }
}

}  // namespace tessera::kernels
