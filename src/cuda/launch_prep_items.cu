// GPU work-item builders: per-CTA work items, split-KV partitions balanced by active-tile count, partial slots and
// the merge index (CUB scans), the persistent work list (CUB stable radix sort, longest first), and the totals.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>

#include "core/launch_prep_rules.hpp"
#include "cuda/check.cuh"
#include "cuda/launch_prep_kernels.cuh"

namespace tessera::prep {

namespace {

constexpr int kThreads = 128;
unsigned blocks_for(std::int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void count_items_kernel(PrepParams p, const std::int32_t* __restrict__ tile_offsets,
                                   std::int32_t* scan_items, std::int32_t* scan_slots, std::int32_t* scan_merge) {
  const std::int64_t n = p.q_tiles();
  const std::int64_t q = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (q > n) return;
  if (q == n) {
    scan_items[q] = scan_slots[q] = scan_merge[q] = 0;
    return;
  }
  const QueryTile qt = query_tile(p, q);
  const std::int32_t k = partitions(p, tile_offsets[qt.tile_row + 1] - tile_offsets[qt.tile_row]);
  scan_items[q] = k;
  scan_slots[q] = k > 1 ? k : 0;
  scan_merge[q] = k > 1 ? 1 : 0;
}

__global__ void write_items_kernel(PrepParams p, const std::int32_t* __restrict__ tile_offsets,
                                   const std::int32_t* __restrict__ scan_items,
                                   const std::int32_t* __restrict__ scan_slots,
                                   const std::int32_t* __restrict__ scan_merge, WorkItem* items,
                                   std::int32_t* merge_offsets, WorkItem* merge_targets) {
  const std::int64_t q = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (q == 0 && merge_offsets) merge_offsets[0] = 0;
  if (q >= p.q_tiles()) return;
  const QueryTile qt = query_tile(p, q);
  const std::int32_t begin = tile_offsets[qt.tile_row];
  const std::int32_t n_e = tile_offsets[qt.tile_row + 1] - begin;
  const bool split = p.split > 1;
  const std::int32_t slot_base = split ? scan_slots[q] : 0;
  write_items(p, qt, begin, n_e, slot_base, items + (split ? scan_items[q] : q));
  const std::int32_t k = partitions(p, n_e);
  if (k > 1) {
    const std::int32_t m = scan_merge[q];
    merge_targets[m] = merge_target(qt, begin, n_e);
    merge_offsets[m + 1] = slot_base + k;
  }
}

__global__ void totals_kernel(PrepParams p, const std::int32_t* tile_offsets, const std::int32_t* scan_items,
                              const std::int32_t* scan_slots, const std::int32_t* scan_merge, std::int32_t* totals) {
  const std::int64_t n = p.q_tiles();
  totals[0] = tile_offsets[p.tile_rows()];
  const bool split = p.split > 1;
  totals[1] = split ? scan_items[n] : static_cast<std::int32_t>(n);
  totals[2] = split ? scan_slots[n] : 0;
  totals[3] = split ? scan_merge[n] : 0;
}

__global__ void persistent_keys_kernel(const WorkItem* items, const std::int32_t* totals, std::int64_t bound,
                                       std::uint32_t* keys, std::int32_t* order) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= bound) return;
  keys[i] = i < totals[1] ? persistent_key(items[i]) : 0xffffffffu;  // padding sorts last
  order[i] = static_cast<std::int32_t>(i);
}

__global__ void gather_items_kernel(const WorkItem* src, const std::int32_t* order, const std::int32_t* totals,
                                    std::int64_t bound, WorkItem* dst) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= bound || i >= totals[1]) return;
  dst[i] = src[order[i]];
}

}  // namespace

std::size_t work_items_cub_temp_bytes(std::int64_t q_tiles, std::int64_t items_bound) {
  std::size_t scan = 0, sort = 0;
  TESSERA_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan, static_cast<std::int32_t*>(nullptr),
                                                   static_cast<std::int32_t*>(nullptr), static_cast<int>(q_tiles + 1)));
  TESSERA_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort, static_cast<std::uint32_t*>(nullptr),
                                                     static_cast<std::uint32_t*>(nullptr),
                                                     static_cast<std::int32_t*>(nullptr),
                                                     static_cast<std::int32_t*>(nullptr),
                                                     static_cast<int>(std::max<std::int64_t>(items_bound, 1))));
  return std::max(scan, sort);
}

void build_work_items_gpu(const PrepParams& p, ItemBuffers& b, bool persistent, std::int64_t items_bound,
                          cudaStream_t stream) {
  const std::int64_t n = p.q_tiles();
  const bool split = p.split > 1;
  if (split) {
    count_items_kernel<<<blocks_for(n + 1), kThreads, 0, stream>>>(p, b.tile_offsets, b.scan_items, b.scan_slots,
                                                                   b.scan_merge);
    TESSERA_CUDA_CHECK_LAUNCH();
    for (std::int32_t* a : {b.scan_items, b.scan_slots, b.scan_merge}) {
      std::size_t temp = b.cub_temp_bytes;
      TESSERA_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(b.cub_temp, temp, a, a, static_cast<int>(n + 1), stream));
    }
  }
  write_items_kernel<<<blocks_for(std::max<std::int64_t>(n, 1)), kThreads, 0, stream>>>(
      p, b.tile_offsets, b.scan_items, b.scan_slots, b.scan_merge, b.items, b.merge_offsets, b.merge_targets);
  TESSERA_CUDA_CHECK_LAUNCH();
  totals_kernel<<<1, 1, 0, stream>>>(p, b.tile_offsets, b.scan_items, b.scan_slots, b.scan_merge, b.totals);
  TESSERA_CUDA_CHECK_LAUNCH();
  if (persistent && items_bound > 0) {
    persistent_keys_kernel<<<blocks_for(items_bound), kThreads, 0, stream>>>(b.items, b.totals, items_bound, b.keys,
                                                                             b.order);
    TESSERA_CUDA_CHECK_LAUNCH();
    std::size_t temp = b.cub_temp_bytes;
    TESSERA_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(b.cub_temp, temp, b.keys, b.keys_alt, b.order, b.order_alt,
                                                       static_cast<int>(items_bound), 0, 32, stream));
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(b.items_alt, b.items, sizeof(WorkItem) * items_bound,
                                       cudaMemcpyDeviceToDevice, stream));
    gather_items_kernel<<<blocks_for(items_bound), kThreads, 0, stream>>>(b.items_alt, b.order_alt, b.totals,
                                                                          items_bound, b.items);
    TESSERA_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace tessera::prep
