#pragma once
// Launchers of the mask-state kernels (src/cuda/mask_state_{dense,lists,csr}.cu), called by mask_state.cu.
#include <cuda_runtime.h>

#include <cstdint>

namespace tessera::detail {

struct DeviceCounters;

/// A dense block mask [B_m, H_m, n_qb, n_kvb] of bytes (bool/u8; non-zero = active), strides in elements.
struct DenseMaskArgs {
  const unsigned char* data;
  std::int64_t stride[4];
  std::int64_t heads, n_qb, n_kvb, rows;
  std::int64_t span;  ///< bytes from data to one past the last element (1 + sum of (shape - 1) * stride)
};

/// Bitmap words per row used by the dense path (row start aligned down to 16 bytes: up to 15 leading columns).
__host__ __device__ inline std::int64_t dense_words_per_row(std::int64_t n_kvb) { return (n_kvb + 15 + 31) / 32; }

/// Pass 1 (dense): per row, bit words into `bitmap` [rows, dense_words_per_row], active count into
/// row_count[row] (row_count[rows] = 0), counters. `grid` blocks of 256 threads (grid-stride over rows).
void launch_dense_count(const DenseMaskArgs& a, std::uint32_t* bitmap, std::int32_t* row_count, DeviceCounters* c,
                        int grid, cudaStream_t s);
/// Pass 2 (dense): columns of each row from `bitmap` into col_indices at row_offsets[row]. With `guard` set
/// (speculative launch before the host has read the counters), nothing is written when the counters show an error
/// or more than `capacity` active blocks.
void launch_dense_emit(const DenseMaskArgs& a, const std::uint32_t* bitmap, const std::int32_t* row_offsets,
                       std::int32_t* col_indices, const DeviceCounters* guard, long long capacity, int grid,
                       cudaStream_t s);

/// Index lists: counts [rows], indices [rows, k_max], int32, contiguous.
struct ListMaskArgs {
  const std::int32_t* counts;
  const std::int32_t* indices;
  std::int64_t k_max, n_kvb, rows;
};

/// Warps per block and dynamic shared memory (bytes) of the index-list kernels for n_kvb; warps == 0 when one
/// row's bitmap does not fit in the device's shared memory (`max_smem` = opt-in limit per block).
void list_launch_shape(std::int64_t n_kvb, int max_smem, int& warps, int& smem_bytes);
/// Pass 1 (index lists): validation, per-row counts into row_count (row_count[rows] = 0), counters.
void launch_list_count(const ListMaskArgs& a, std::int32_t* row_count, DeviceCounters* c, int grid, int warps,
                       int smem_bytes, cudaStream_t s);
/// Pass 2 (index lists): each row sorted (through a shared-memory bitmap) into col_indices at row_offsets[row].
/// `guard`, `capacity`: as launch_dense_emit().
void launch_list_emit(const ListMaskArgs& a, const std::int32_t* row_offsets, std::int32_t* col_indices,
                      const DeviceCounters* guard, long long capacity, int grid, int warps, int smem_bytes,
                      cudaStream_t s);

/// Block-CSR: row_offsets [rows + 1], col_indices [nnz], int32, contiguous.
struct CsrMaskArgs {
  const std::int32_t* row_offsets;
  const std::int32_t* col_indices;
  std::int64_t nnz, n_kvb, rows;
};

/// The only pass (block-CSR): validation of offsets and columns, counters, and the copy of both arrays as they
/// are into out_offsets [rows + 1] and out_cols [nnz] (unspecified contents when the mask is invalid).
void launch_csr_check(const CsrMaskArgs& a, DeviceCounters* c, std::int32_t* out_offsets, std::int32_t* out_cols,
                      int grid, cudaStream_t s);

/// The canonical block-CSR of mu(M) (sorted rows) for the coarsened pair counts.
struct CoarsenArgs {
  const std::int32_t* row_offsets;  ///< [heads_rows + 1]
  const std::int32_t* col_indices;  ///< [nnz]
  std::int64_t nnz;                 ///< entries readable in col_indices (offsets are clamped to it)
  std::int64_t heads_rows;          ///< B_m * H_m * n_qb
  std::int64_t n_qb, n_kvb;
};

/// Adds MaskCounters::coarsened_pairs of the CSR to c->coarsened (zero them first). A warp per group of 8 rows with
/// a shared-memory bitmap of n_kvb bits when it fits in `max_smem` (the opt-in limit per block), else (or with
/// `force_merge`, for tests and benchmarks) a thread per group merging the sorted rows.
void launch_coarsen(const CoarsenArgs& a, DeviceCounters* c, int sms, int max_smem, bool force_merge, cudaStream_t s);

}  // namespace tessera::detail
