// Coarsened pair counts of mu(M) (MaskCounters::coarsened_pairs) on the GPU, from the canonical block-CSR (after
// pass 2, or block-CSR input after its fused copy). Work unit: an aligned group of 8 query-block rows of one
// (batch, head), which holds its pairs (c = 2), quads (c = 4) and octet (c = 8). The CPU twin is count_mask_csr()
// (src/core/mask_state_cpu.cpp).
//  - bitmap_kernel (the usual path): one warp per group, one pass over the group's entries (its rows are adjacent
//    in the CSR): each lane sets its entry's column in its pair's, quad's and octet's shared-memory bitmaps (7 of
//    n_kvb bits per warp) with atomicOr, and a lane that sets a bit first adds that subgroup's row count (every row
//    of a subgroup computes its union).
//  - merge_kernel (when one bitmap does not fit in shared memory, or forced for tests): one thread per group
//    merges the rows' sorted lists and adds each distinct column to every subgroup holding it.
// Both are safe on an invalid mask (whose counts the host discards): offsets are clamped to [0, nnz] and columns
// outside [0, n_kvb) are skipped, so no access leaves the arrays and every loop ends.
#include <algorithm>

#include "core/coarsened_pairs.hpp"
#include "cuda/check.cuh"
#include "cuda/mask_state_common.cuh"
#include "cuda/mask_state_launch.hpp"

namespace tessera::detail {

namespace {

constexpr int kMaxWarps = 8;
constexpr int kMergeThreads = 256;

__device__ inline std::int64_t min64(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
__device__ inline std::int64_t max64(std::int64_t a, std::int64_t b) { return a > b ? a : b; }

struct Group {
  std::int64_t row0;  ///< first row
  int n;              ///< rows (8, or fewer at the end of a head)
};

__device__ inline Group group_at(const CoarsenArgs& a, std::int64_t g) {
  const std::int64_t per_head = (a.n_qb + 7) / 8, head = g / per_head, qb0 = (g % per_head) * 8;
  return {head * a.n_qb + qb0, static_cast<int>(min64(8, a.n_qb - qb0))};
}

__device__ inline void row_range(const CoarsenArgs& a, std::int64_t row, std::int64_t& begin, std::int64_t& end) {
  begin = min64(max64(a.row_offsets[row], 0), a.nnz);
  end = min64(max64(a.row_offsets[row + 1], begin), a.nnz);
}

__device__ inline void flush(const unsigned long long (&pairs)[3], DeviceCounters* c) {
  for (int i = 0; i < 3; ++i) {
    unsigned long long v = pairs[i];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullWarp, v, o);
    if (threadIdx.x % 32 == 0 && v != 0) atomicAdd(&c->coarsened[i], v);
  }
}

__global__ void bitmap_kernel(CoarsenArgs a, DeviceCounters* c) {
  extern __shared__ std::uint32_t dyn[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int words = static_cast<int>((a.n_kvb + 31) / 32);
  // Per warp, 7 bitmaps of n_kvb bits: pairs 0-3, quads 4-5, the octet 6.
  std::uint32_t* bm = dyn + static_cast<std::int64_t>(warp) * 7 * words;
  const std::int64_t groups = a.heads_rows / a.n_qb * ((a.n_qb + 7) / 8);
  unsigned long long pairs[3] = {0, 0, 0};
  for (std::int64_t g = static_cast<std::int64_t>(blockIdx.x) * warps + warp; g < groups;
       g += static_cast<std::int64_t>(gridDim.x) * warps) {
    const Group grp = group_at(a, g);
    // The group's rows are adjacent in the CSR: offsets o[0..n] (clamped, non-decreasing), one load per lane.
    std::int64_t mine = 0;
    if (lane <= grp.n) mine = min64(max64(a.row_offsets[grp.row0 + lane], 0), a.nnz);
    std::int64_t o[9];
#pragma unroll
    for (int r = 0; r < 9; ++r) o[r] = __shfl_sync(kFullWarp, mine, r <= grp.n ? r : grp.n);
#pragma unroll
    for (int r = 1; r < 9; ++r) o[r] = max64(o[r], o[r - 1]);
    for (int w = lane; w < 7 * words; w += 32) bm[w] = 0;
    __syncwarp();
    // One pass over the group's entries; rows per subgroup: a pair, quad or octet may be cut by the head's end.
    // o[r] for r > n is o[n] (copied from lane n), so o[8] ends the group and no entry maps to a row >= n.
    for (std::int64_t i = o[0] + lane; i < o[8]; i += 32) {
      const std::int32_t col = a.col_indices[i];
      int r = 0;
#pragma unroll
      for (int k = 1; k < 8; ++k) r += i >= o[k] ? 1 : 0;
      if (col < 0 || col >= a.n_kvb) continue;
      const std::uint32_t bit = 1u << (col & 31);
      const int word = col >> 5, p = r / 2, q = r / 4;
      if (!(atomicOr(bm + p * words + word, bit) & bit))
        pairs[0] += static_cast<unsigned long long>(subgroup_rows(grp.n, 2 * p, 2));
      if (!(atomicOr(bm + (4 + q) * words + word, bit) & bit))
        pairs[1] += static_cast<unsigned long long>(subgroup_rows(grp.n, 4 * q, 4));
      if (!(atomicOr(bm + 6 * words + word, bit) & bit))
        pairs[2] += static_cast<unsigned long long>(subgroup_rows(grp.n, 0, 8));
    }
    __syncwarp();
  }
  flush(pairs, c);
}

__global__ void __launch_bounds__(kMergeThreads) merge_kernel(CoarsenArgs a, DeviceCounters* c) {
  const std::int64_t groups = a.heads_rows / a.n_qb * ((a.n_qb + 7) / 8);
  unsigned long long pairs[3] = {0, 0, 0};
  for (std::int64_t g = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const Group grp = group_at(a, g);
    std::int64_t pos[8], end[8], group[3] = {0, 0, 0};
    for (int r = 0; r < 8; ++r) {
      pos[r] = end[r] = 0;
      if (r < grp.n) row_range(a, grp.row0 + r, pos[r], end[r]);
    }
    add_group_coarsened_pairs(a.col_indices, pos, end, grp.n, a.n_kvb, group);
    for (int i = 0; i < 3; ++i) pairs[i] += static_cast<unsigned long long>(group[i]);
  }
  flush(pairs, c);
}

}  // namespace

void launch_coarsen(const CoarsenArgs& a, DeviceCounters* c, int sms, int max_smem, bool force_merge,
                    cudaStream_t s) {
  if (a.heads_rows == 0 || a.n_qb == 0) return;
  const std::int64_t groups = a.heads_rows / a.n_qb * ((a.n_qb + 7) / 8);
  const std::int64_t row_bytes = (a.n_kvb + 31) / 32 * 4 * 7;  // a warp's 7 bitmaps (the name: one per warp)
  if (!force_merge && row_bytes <= max_smem) {
    // Up to 8 warps in the default 48 KiB; one warp with the opt-in shared memory for wider masks.
    const int warps_fit =
        row_bytes <= 48 * 1024 ? static_cast<int>(std::clamp<std::int64_t>(48 * 1024 / row_bytes, 1, kMaxWarps)) : 1;
    const int smem = static_cast<int>(warps_fit * row_bytes);
    if (smem > 48 * 1024)
      TESSERA_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(&bitmap_kernel),
                                              cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const int grid = static_cast<int>(std::clamp<std::int64_t>((groups + warps_fit - 1) / warps_fit, 1,
                                                               std::int64_t{sms} * 16));
    bitmap_kernel<<<grid, warps_fit * 32, smem, s>>>(a, c);
  } else {
    const int grid = static_cast<int>(
        std::clamp<std::int64_t>((groups + kMergeThreads - 1) / kMergeThreads, 1, std::int64_t{sms} * 4));
    merge_kernel<<<grid, kMergeThreads, 0, s>>>(a, c);
  }
  TESSERA_CUDA_CHECK_LAUNCH();
}

}  // namespace tessera::detail
