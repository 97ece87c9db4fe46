// GPU tile-row builders: refined tile lists, coarsened tile lists with membership bitmasks, packed KV index
// lists, and the traversal order. One warp per tile row splits the row's kv-unit space over its lanes
// (build_tile_row_range in core/launch_prep_rules.hpp, equal to the CPU twin's build_tile_row); CUB scans the
// per-row counts into the tile-row offsets; the traversal reorder runs one thread per row.
#include <cub/device/device_scan.cuh>

#include "core/launch_prep_rules.hpp"
#include "cuda/check.cuh"
#include "cuda/launch_prep_kernels.cuh"

namespace tessera::prep {

namespace {

constexpr int kThreads = 128;

constexpr unsigned kFull = 0xffffffffu;

__device__ std::int32_t warp_sum(std::int32_t v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

__device__ std::int32_t warp_exclusive_scan(std::int32_t v, int lane) {
  std::int32_t x = v;
  for (int o = 1; o < 32; o <<= 1) {
    const std::int32_t y = __shfl_up_sync(kFull, x, o);
    if (lane >= o) x += y;
  }
  return x - v;
}

// Lane `lane`'s share [lo, hi) of a row's kv-unit space.
__device__ void lane_units(const PrepParams& p, int lane, std::int32_t& lo, std::int32_t& hi) {
  const std::int64_t u = row_units(p);
  lo = static_cast<std::int32_t>(u * lane / 32);
  hi = static_cast<std::int32_t>(u * (lane + 1) / 32);
}

// One warp per tile row: entries of the row (the scan's last slot, counts[rows], is set to 0).
__global__ void count_rows_kernel(PrepParams p, const std::int32_t* __restrict__ row_offsets,
                                  const std::int32_t* __restrict__ cols, std::int32_t* __restrict__ counts) {
  const std::int64_t rows = p.tile_rows();
  const std::int64_t r = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) {
    if (r == rows && lane == 0) counts[r] = 0;
    return;  // warp-uniform
  }
  std::int32_t lo, hi;
  lane_units(p, lane, lo, hi);
  const RangeCount rc = build_tile_row_range(p, row_offsets, cols, r, lo, hi, 0, 0, nullptr, nullptr, nullptr);
  const std::int32_t units = warp_sum(rc.units);
  const std::int32_t entries = warp_sum(rc.entries);
  if (lane == 0) counts[r] = p.pack ? (units + p.pack - 1) / p.pack : entries;
}

// One warp per tile row: lanes count their unit ranges again, scan, then write their entries.
__global__ void fill_rows_kernel(PrepParams p, const std::int32_t* __restrict__ row_offsets,
                                 const std::int32_t* __restrict__ cols, const std::int32_t* __restrict__ tile_offsets,
                                 std::int32_t* kv_tile, std::uint64_t* member, std::int32_t* gather) {
  const std::int64_t r = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (r >= p.tile_rows()) return;  // warp-uniform
  const std::int64_t o = tile_offsets[r];
  std::int32_t lo, hi;
  lane_units(p, lane, lo, hi);
  const RangeCount rc = build_tile_row_range(p, row_offsets, cols, r, lo, hi, 0, 0, nullptr, nullptr, nullptr);
  const std::int32_t unit_base = warp_exclusive_scan(rc.units, lane);
  const std::int32_t entry_base = warp_exclusive_scan(rc.entries, lane);
  if (p.pack) {
    // Packed entries may be shared by two lanes: clear them first (member 0, gather -1).
    const std::int32_t n = tile_offsets[r + 1] - tile_offsets[r];
    for (std::int32_t e = lane; e < n; e += 32) {
      if (p.membership) member[o + e] = 0;
      for (int j = 0; j < p.pack; ++j) gather[(o + e) * p.pack + j] = -1;
    }
    __syncwarp();
  }
  build_tile_row_range(p, row_offsets, cols, r, lo, hi, unit_base, entry_base, p.pack ? nullptr : kv_tile + o,
                       p.membership ? member + o : nullptr, p.pack ? gather + o * p.pack : nullptr);
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
  count_rows_kernel<<<blocks_for((rows + 1) * 32), kThreads, 0, stream>>>(p, row_offsets, cols, b.tile_offsets);
  TESSERA_CUDA_CHECK_LAUNCH();
  std::size_t temp = b.cub_temp_bytes;
  TESSERA_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(b.cub_temp, temp, b.tile_offsets, b.tile_offsets,
                                                   static_cast<int>(rows + 1), stream));
  const bool reorder = p.traversal != 0;
  if (rows > 0) {
    fill_rows_kernel<<<blocks_for(rows * 32), kThreads, 0, stream>>>(p, row_offsets, cols, b.tile_offsets,
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
