// mu(M) from block-CSR: one pass validates offsets and columns (range, strictly increasing), counts runs and, the
// arrays being already canonical, copies them as they are into mu(M) on the way (one read, one write).
#include <climits>

#include "cuda/check.cuh"
#include "cuda/mask_state_common.cuh"
#include "cuda/mask_state_launch.hpp"

namespace tessera::detail {

namespace {

constexpr int kWarps = 8;

__global__ void __launch_bounds__(kWarps * 32) csr_check_kernel(CsrMaskArgs a, DeviceCounters* c,
                                                                std::int32_t* out_offsets, std::int32_t* out_cols) {
  __shared__ unsigned long long smem[kWarps * 5];
  const int lane = threadIdx.x % 32;
  const std::int64_t warp0 = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const std::int64_t n_warps = static_cast<std::int64_t>(gridDim.x) * kWarps;
  WarpCounts w;
  for (std::int64_t row = warp0; row < a.rows; row += n_warps) {
    const std::int64_t o0 = __ldg(a.row_offsets + row);
    const std::int64_t o1 = __ldg(a.row_offsets + row + 1);
    if (lane == 0) {
      out_offsets[row] = static_cast<std::int32_t>(o0);
      if (row == a.rows - 1) out_offsets[a.rows] = static_cast<std::int32_t>(o1);
      if (row == 0 && o0 != 0) record_error(c, kErrRowOffsets, 0);
      if (o1 < o0) record_error(c, kErrRowOffsets, static_cast<unsigned long long>(row + 1));
      if (row == a.rows - 1 && o1 != a.nnz) record_error(c, kErrRowOffsets, static_cast<unsigned long long>(a.rows));
      if (o0 < 0 || o0 > a.nnz) record_error(c, kErrRowOffsets, static_cast<unsigned long long>(row));
    }
    const bool ok = o0 >= 0 && o1 >= o0 && o1 <= a.nnz;
    int runs = 0, long_blocks = 0;
    if (ok) {
      for (std::int64_t p = o0 + lane; p < o1; p += 32) {
        const std::int32_t col = __ldg(a.col_indices + p);
        out_cols[p] = col;
        const std::int32_t prev = p > o0 ? __ldg(a.col_indices + p - 1) : INT_MIN;
        if (col < 0 || col >= a.n_kvb || (p > o0 && col <= prev)) {
          record_error(c, kErrColumns, static_cast<unsigned long long>(p));
          continue;
        }
        const bool pair = p > o0 && prev == col - 1;
        runs += pair ? 0 : 1;
        if (pair) {
          const bool prev_starts = p - 1 == o0 || __ldg(a.col_indices + p - 2) != prev - 1;
          long_blocks += 1 + (prev_starts ? 1 : 0);
        }
      }
    }
    add_row(w, ok ? static_cast<int>(o1 - o0) : 0, warp_sum(runs), warp_sum(long_blocks));
  }
  block_flush(w, c, smem);
}

}  // namespace

void launch_csr_check(const CsrMaskArgs& a, DeviceCounters* c, std::int32_t* out_offsets, std::int32_t* out_cols,
                      int grid, cudaStream_t s) {
  csr_check_kernel<<<grid, kWarps * 32, 0, s>>>(a, c, out_offsets, out_cols);
  TESSERA_CUDA_CHECK_LAUNCH();
}

}  // namespace tessera::detail
