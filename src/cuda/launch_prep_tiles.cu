// GPU tile-row builders: refined tile lists, coarsened tile lists with membership bitmasks, packed KV index
// lists, and the traversal order. One thread per tile row follows core/launch_prep_rules.hpp; CUB scans the
// per-row counts into the tile-row offsets.
#include <cub/device/device_scan.cuh>

#include "core/launch_prep_rules.hpp"
#include "cuda/check.cuh"
#include "cuda/launch_prep_kernels.cuh"

namespace tessera::prep {

namespace {

constexpr int kThreads = 128;

__global__ void count_rows_kernel(PrepParams p, const std::int32_t* __restrict__ row_offsets,
                                  const std::int32_t* __restrict__ cols, std::int32_t* __restrict__ counts) {
  const std::int64_t rows = p.tile_rows();
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < rows) counts[r] = build_tile_row(p, row_offsets, cols, r, nullptr, nullptr, nullptr);
  if (r == rows) counts[r] = 0;  // the scan's last slot becomes the total
}

__global__ void fill_rows_kernel(PrepParams p, const std::int32_t* __restrict__ row_offsets,
                                 const std::int32_t* __restrict__ cols, const std::int32_t* __restrict__ tile_offsets,
                                 std::int32_t* kv_tile, std::uint64_t* member, std::int32_t* gather) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= p.tile_rows()) return;
  const std::int64_t o = tile_offsets[r];
  build_tile_row(p, row_offsets, cols, r, p.pack ? nullptr : kv_tile + o, p.membership ? member + o : nullptr,
                 p.pack ? gather + o * p.pack : nullptr);
}

__global__ void reorder_rows_kernel(PrepParams p, const std::int32_t* __restrict__ tile_offsets,
                                    const std::int32_t* kv_in, const std::uint64_t* mem_in,
                                    const std::int32_t* gather_in, std::int32_t* kv_out, std::uint64_t* mem_out,
                                    std::int32_t* gather_out) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= p.tile_rows()) return;
  const std::int64_t o = tile_offsets[r];
  const std::int32_t n = tile_offsets[r + 1] - tile_offsets[r];
  const std::int64_t g = p.pack;
  reorder_tile_row(p, n, p.pack ? nullptr : kv_in + o, p.membership ? mem_in + o : nullptr,
                   p.pack ? gather_in + o * g : nullptr, p.pack ? nullptr : kv_out + o,
                   p.membership ? mem_out + o : nullptr, p.pack ? gather_out + o * g : nullptr);
}

unsigned blocks_for(std::int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

void build_tile_rows_gpu(const PrepParams& p, const std::int32_t* row_offsets, const std::int32_t* cols,
                         TileRowBuffers& b, cudaStream_t stream) {
  const std::int64_t rows = p.tile_rows();
  count_rows_kernel<<<blocks_for(rows + 1), kThreads, 0, stream>>>(p, row_offsets, cols, b.tile_offsets);
  TESSERA_CUDA_CHECK_LAUNCH();
  std::size_t temp = b.cub_temp_bytes;
  TESSERA_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(b.cub_temp, temp, b.tile_offsets, b.tile_offsets,
                                                   static_cast<int>(rows + 1), stream));
  const bool reorder = p.traversal != 0;
  if (rows > 0) {
    fill_rows_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(p, row_offsets, cols, b.tile_offsets,
                                                                reorder ? b.tmp_kv : b.kv_tile,
                                                                reorder ? b.tmp_member : b.member,
                                                                reorder ? b.tmp_gather : b.gather);
    TESSERA_CUDA_CHECK_LAUNCH();
    if (reorder) {
      reorder_rows_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(p, b.tile_offsets, b.tmp_kv, b.tmp_member,
                                                                     b.tmp_gather, b.kv_tile, b.member, b.gather);
      TESSERA_CUDA_CHECK_LAUNCH();
    }
  }
}

std::size_t tile_rows_cub_temp_bytes(std::int64_t rows) {
  std::size_t temp = 0;
  TESSERA_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, temp, static_cast<std::int32_t*>(nullptr),
                                                   static_cast<std::int32_t*>(nullptr), static_cast<int>(rows + 1)));
  return temp;
}

}  // namespace tessera::prep
