// mu(M) from index lists (counts [rows], indices [rows, K_max]; rows may be unsorted). One warp per row sets the
// row's kv blocks in a shared-memory bitmap (range and duplicate checks on the way), which sorts the row; pass 1
// counts, pass 2 rebuilds the bitmap and writes the columns.
#include "cuda/check.cuh"
#include "cuda/mask_state_common.cuh"
#include "cuda/mask_state_launch.hpp"

namespace tessera::detail {

namespace {

constexpr int kMaxWarps = 8;
constexpr int kDefaultSmem = 48 * 1024;

__device__ inline int list_words(const ListMaskArgs& a) { return static_cast<int>((a.n_kvb + 31) / 32); }

/// Sets the bits of one row's first `cnt` indices in `bm` (zeroed here). With kCheck, range errors and duplicates
/// are recorded (position row * K_max + j) and the offending entries skipped.
template <bool kCheck>
__device__ inline void fill_row_bitmap(const ListMaskArgs& a, std::int64_t row, int cnt, std::uint32_t* bm, int words,
                                       DeviceCounters* c, int lane) {
  for (int i = lane; i < words; i += 32) bm[i] = 0;
  __syncwarp();
  const std::int32_t* idx = a.indices + row * a.k_max;
  for (int j = lane; j < cnt; j += 32) {
    const std::int32_t v = __ldg(idx + j);
    if (kCheck && (v < 0 || v >= a.n_kvb)) {
      record_error(c, kErrColumns, static_cast<unsigned long long>(row * a.k_max + j));
      continue;
    }
    const std::uint32_t bit = 1u << (v & 31);
    const std::uint32_t old = atomicOr(bm + (v >> 5), bit);
    if (kCheck && (old & bit)) record_error(c, kErrColumns, static_cast<unsigned long long>(row * a.k_max + j));
  }
  __syncwarp();
}

__global__ void list_count_kernel(ListMaskArgs a, std::int32_t* row_count, DeviceCounters* c) {
  extern __shared__ std::uint32_t dyn[];
  __shared__ unsigned long long smem[kMaxWarps * 5];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int words = list_words(a);
  std::uint32_t* bm = dyn + warp * words;
  const std::int64_t warp0 = static_cast<std::int64_t>(blockIdx.x) * warps + warp;
  const std::int64_t n_warps = static_cast<std::int64_t>(gridDim.x) * warps;
  if (warp0 == 0 && lane == 0) row_count[a.rows] = 0;
  WarpCounts w;
  for (std::int64_t row = warp0; row < a.rows; row += n_warps) {
    int cnt = __ldg(a.counts + row);
    if (cnt < 0 || cnt > a.k_max) {
      if (lane == 0) record_error(c, kErrCounts, static_cast<unsigned long long>(row));
      cnt = 0;
    }
    fill_row_bitmap<true>(a, row, cnt, bm, words, c, lane);
    const WordCounts wc = count_row_words([&](int k) { return bm[k]; }, words, nullptr, lane);
    if (lane == 0) row_count[row] = wc.active;
    add_row(w, wc.active, wc.runs, wc.long_blocks);
    __syncwarp();
  }
  block_flush(w, c, smem);
}

__global__ void list_emit_kernel(ListMaskArgs a, const std::int32_t* row_offsets, std::int32_t* col_indices,
                                 const DeviceCounters* guard, long long capacity) {
  if (pass2_skipped(guard, capacity)) return;
  extern __shared__ std::uint32_t dyn[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int words = list_words(a);
  std::uint32_t* bm = dyn + warp * words;
  const std::int64_t warp0 = static_cast<std::int64_t>(blockIdx.x) * warps + warp;
  const std::int64_t n_warps = static_cast<std::int64_t>(gridDim.x) * warps;
  for (std::int64_t row = warp0; row < a.rows; row += n_warps) {
    fill_row_bitmap<false>(a, row, __ldg(a.counts + row), bm, words, nullptr, lane);
    emit_row_words([&](int k) { return bm[k]; }, words, 0, col_indices + row_offsets[row], lane);
    __syncwarp();
  }
}

void set_smem(const void* kernel, int smem_bytes) {
  if (smem_bytes > kDefaultSmem) {
    TESSERA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  }
}

}  // namespace

void list_launch_shape(std::int64_t n_kvb, int max_smem, int& warps, int& smem_bytes) {
  const std::int64_t row_bytes = (n_kvb + 31) / 32 * 4;
  const std::int64_t budget = kMaxWarps * row_bytes <= kDefaultSmem ? kDefaultSmem : max_smem;
  warps = static_cast<int>(std::min<std::int64_t>(kMaxWarps, budget / row_bytes));
  smem_bytes = static_cast<int>(warps * row_bytes);
}

void launch_list_count(const ListMaskArgs& a, std::int32_t* row_count, DeviceCounters* c, int grid, int warps,
                       int smem_bytes, cudaStream_t s) {
  set_smem(reinterpret_cast<const void*>(&list_count_kernel), smem_bytes);
  list_count_kernel<<<grid, warps * 32, smem_bytes, s>>>(a, row_count, c);
  TESSERA_CUDA_CHECK_LAUNCH();
}

void launch_list_emit(const ListMaskArgs& a, const std::int32_t* row_offsets, std::int32_t* col_indices,
                      const DeviceCounters* guard, long long capacity, int grid, int warps, int smem_bytes,
                      cudaStream_t s) {
  set_smem(reinterpret_cast<const void*>(&list_emit_kernel), smem_bytes);
  list_emit_kernel<<<grid, warps * 32, smem_bytes, s>>>(a, row_offsets, col_indices, guard, capacity);
  TESSERA_CUDA_CHECK_LAUNCH();
}

}  // namespace tessera::detail
