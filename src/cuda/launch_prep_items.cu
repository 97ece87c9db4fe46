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

// Split-KV: per query tile, k = partitions (low 32 bits) and whether k == 1 (high 32 bits); one 64-bit exclusive
// scan then gives every tile its first item (low), and its first partial slot (items before - unsplit tiles before)
// and merge index (tiles before - unsplit tiles before). Item totals fit int32, so the low half never carries.
__global__ void count_items_kernel(PrepParams p, const std::int32_t* __restrict__ tile_offsets,
                                   std::uint64_t* __restrict__ scan) {
  const std::int32_t n = static_cast<std::int32_t>(p.q_tiles());
  const std::int32_t q = static_cast<std::int32_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (q > n) return;
  if (q == n) {
    scan[q] = 0;
    return;
  }
  const QueryTile qt = query_tile(p, q);
  const std::int32_t k = partitions(p, tile_offsets[qt.tile_row + 1] - tile_offsets[qt.tile_row]);
  scan[q] = static_cast<std::uint64_t>(k) | (static_cast<std::uint64_t>(k == 1) << 32);
}

__device__ __forceinline__ std::int32_t scan_items(std::uint64_t s) { return static_cast<std::int32_t>(s); }
__device__ __forceinline__ std::int32_t scan_ones(std::uint64_t s) { return static_cast<std::int32_t>(s >> 32); }

__device__ void write_totals(const PrepParams& p, const std::int32_t* tile_offsets, const std::uint64_t* scan,
                             std::int32_t* totals) {
  const std::int32_t n = static_cast<std::int32_t>(p.q_tiles());
  totals[0] = tile_offsets[p.tile_rows()];
  if (p.split > 1) {
    const std::uint64_t s = scan[n];
    totals[1] = scan_items(s);
    totals[2] = scan_items(s) - scan_ones(s);
    totals[3] = n - scan_ones(s);
  } else {
    totals[1] = n;
    totals[2] = totals[3] = 0;
  }
}

// One thread per query tile; thread 0 also writes the totals (entries, items, partials, merges).
__global__ void write_items_kernel(PrepParams p, const std::int32_t* __restrict__ tile_offsets,
                                   const std::uint64_t* __restrict__ scan, WorkItem* __restrict__ items,
                                   std::int32_t* __restrict__ merge_offsets, WorkItem* __restrict__ merge_targets,
                                   std::int32_t* __restrict__ totals) {
  const std::int32_t q = static_cast<std::int32_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool split = p.split > 1;
  if (q == 0) {
    merge_offsets[0] = 0;  // {0} also when nothing is split
    write_totals(p, tile_offsets, scan, totals);
  }
  if (q >= static_cast<std::int32_t>(p.q_tiles())) return;
  const QueryTile qt = query_tile(p, q);
  const std::int32_t begin = tile_offsets[qt.tile_row];
  const std::int32_t n_e = tile_offsets[qt.tile_row + 1] - begin;
  const std::uint64_t s = split ? scan[q] : 0;
  const std::int32_t slot_base = scan_items(s) - scan_ones(s);
  write_items(p, qt, begin, n_e, slot_base, items + (split ? scan_items(s) : q));
  const std::int32_t k = partitions(p, n_e);
  if (k > 1) {
    const std::int32_t m = q - scan_ones(s);
    merge_targets[m] = merge_target(qt, begin, n_e);
    merge_offsets[m + 1] = slot_base + k;
  }
}

// Persistent order: stable ascending sort of (longest - entries) = the rules' persistent_key order (decreasing
// entry count, stable), on only the bits that can differ; padding past the item count sorts last.
__global__ void persistent_keys_kernel(const WorkItem* items, const std::int32_t* totals, std::int32_t bound,
                                       std::uint32_t longest, std::uint32_t* keys, std::int32_t* order) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= bound) return;
  keys[i] = i < totals[1] ? longest - static_cast<std::uint32_t>(items[i].entry_end - items[i].entry_begin)
                          : longest + 1;
  order[i] = i;
}

__global__ void gather_items_kernel(const WorkItem* __restrict__ src, const std::int32_t* __restrict__ order,
                                    const std::int32_t* totals, std::int32_t bound, WorkItem* __restrict__ dst) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= bound || i >= totals[1]) return;
  dst[i] = src[order[i]];
}

}  // namespace

std::size_t work_items_cub_temp_bytes(std::int64_t q_tiles, std::int64_t items_bound) {
  std::size_t scan = 0, sort = 0;
  TESSERA_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan, static_cast<std::uint64_t*>(nullptr),
                                                   static_cast<std::uint64_t*>(nullptr), static_cast<int>(q_tiles + 1)));
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
    count_items_kernel<<<blocks_for(n + 1), kThreads, 0, stream>>>(p, b.tile_offsets, b.scan);
    TESSERA_CUDA_CHECK_LAUNCH();
    std::size_t temp = b.cub_temp_bytes;
    TESSERA_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(b.cub_temp, temp, b.scan, b.scan, static_cast<int>(n + 1), stream));
  }
  const bool sort = persistent && items_bound > 0;
  // The persistent list is written to items_alt, then gathered into items in sorted order.
  write_items_kernel<<<blocks_for(std::max<std::int64_t>(n, 1)), kThreads, 0, stream>>>(
      p, b.tile_offsets, b.scan, sort ? b.items_alt : b.items, b.merge_offsets, b.merge_targets, b.totals);
  TESSERA_CUDA_CHECK_LAUNCH();
  if (sort) {
    // Longest possible row: every unit of the kv space present (span: r_kv entries each; packed: one slot each).
    const std::int64_t longest = static_cast<std::int64_t>(row_units(p)) * (p.pack ? 1 : p.r_kv);
    int end_bit = 1;
    while ((std::int64_t{1} << end_bit) <= longest + 1) ++end_bit;
    const auto bound = static_cast<std::int32_t>(items_bound);
    persistent_keys_kernel<<<blocks_for(items_bound), kThreads, 0, stream>>>(
        b.items_alt, b.totals, bound, static_cast<std::uint32_t>(longest), b.keys, b.order);
    TESSERA_CUDA_CHECK_LAUNCH();
    std::size_t temp = b.cub_temp_bytes;
    TESSERA_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(b.cub_temp, temp, b.keys, b.keys_alt, b.order, b.order_alt,
                                                       bound, 0, end_bit, stream));
    gather_items_kernel<<<blocks_for(items_bound), kThreads, 0, stream>>>(b.items_alt, b.order_alt, b.totals, bound,
                                                                          b.items);
    TESSERA_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace tessera::prep
