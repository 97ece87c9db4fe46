#pragma once
// Split-KV merge: combines the normalized fp32 partials (O_s, LSE_s) of each merged query tile into O (input
// dtype) and LSE: LSE = ln sum_s exp(LSE_s), O = sum_s exp(LSE_s - LSE) O_s. Empty partials (LSE_s = -inf)
// weigh 0; a row whose partials are all empty gets O = 0, LSE = -inf. One warp per row; lane owns D/32
// consecutive elements.
#include <cuda_runtime.h>

#include "kernels/launch.hpp"
#include "kernels/ptx/mma.cuh"

namespace tessera::kernels::mma {

inline constexpr int kMergeWarps = 4;

template <class T, int D>
__global__ void __launch_bounds__(kMergeWarps * 32) merge_kernel(const AttentionParams p, int tile_q) {
  constexpr int kPer = D / 32;
  const int mi = blockIdx.x;
  const WorkItem tgt = p.meta.merge_targets[mi];
  const int s0 = p.meta.merge_offsets[mi], s1 = p.meta.merge_offsets[mi + 1];
  const int lane = threadIdx.x & 31;
  for (int r = blockIdx.y * kMergeWarps + (threadIdx.x >> 5); r < tgt.q_len; r += gridDim.y * kMergeWarps) {
    float mx = -INFINITY;
    for (int s = s0; s < s1; ++s) mx = fmaxf(mx, p.lse_partial[std::int64_t(s) * tile_q + r]);
    float acc[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) acc[i] = 0.f;
    float sum = 0.f;
    if (mx != -INFINITY) {
      for (int s = s0; s < s1; ++s) {
        const float w = __expf(p.lse_partial[std::int64_t(s) * tile_q + r] - mx);
        sum += w;
        const float* src = p.o_partial + (std::int64_t(s) * tile_q + r) * D + lane * kPer;
#pragma unroll
        for (int i = 0; i < kPer; i += 2) {
          const float2 v = *reinterpret_cast<const float2*>(src + i);
          acc[i] += w * v.x;
          acc[i + 1] += w * v.y;
        }
      }
    }
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    T* orow = static_cast<T*>(p.o) + tgt.batch * p.o_stride_b + std::int64_t(tgt.q_start + r) * p.o_stride_n +
              tgt.head * p.o_stride_h + lane * kPer;
#pragma unroll
    for (int i = 0; i < kPer; i += 2)
      *reinterpret_cast<std::uint32_t*>(orow + i) = ptx::pack2<T>(acc[i] * inv, acc[i + 1] * inv);
    if (lane == 0 && p.lse != nullptr)
      p.lse[tgt.batch * p.lse_stride_b + tgt.head * p.lse_stride_h + tgt.q_start + r] =
          sum > 0.f ? mx + __logf(sum) : -INFINITY;
  }
}

}  // namespace tessera::kernels::mma
