// GPU work-item builders: per-CTA work items, split-KV partitions balanced by active-tile count, partial slots and
// the merge index (one single-pass kernel: block scan + decoupled look-back), the persistent work list (CUB stable
// radix sort of the item indices by entry count, longest first, then a gather of the items), and the totals.
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>

#include "core/launch_prep_rules.hpp"
#include "cuda/check.cuh"
#include "cuda/launch_prep_kernels.cuh"
#include "cuda/launch_prep_lookback.cuh"

namespace tessera::prep {

namespace {

constexpr int kThreads = 128;
unsigned blocks_for(std::int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// Split-KV item positions: per query tile a 62-bit value items + 2^31 * unsplit (k = partitions; unsplit = k == 1).
// Its exclusive prefix over the query tiles gives the tile's first item (low 31 bits), its first partial slot
// (items before - unsplit tiles before) and its merge index (tiles before - unsplit tiles before). Item and tile
// totals stay below 2^31 (make_prep_params), so the halves never carry into each other.
constexpr std::uint64_t kUnsplitOne = std::uint64_t{1} << 31;

__device__ __forceinline__ std::int32_t scan_items(std::uint64_t s) {
  return static_cast<std::int32_t>(s & (kUnsplitOne - 1));
}
__device__ __forceinline__ std::int32_t scan_ones(std::uint64_t s) { return static_cast<std::int32_t>(s >> 31); }

// Totals: entries, items, partials, merges. `all` is the inclusive prefix over every query tile (split only).
__device__ void write_totals(const PrepParams& p, const std::int32_t* tile_offsets, std::uint64_t all,
                             std::int32_t* totals) {
  const std::int32_t n = static_cast<std::int32_t>(p.q_tiles());
  totals[0] = tile_offsets[p.tile_rows()];
  if (p.split > 1) {
    totals[1] = scan_items(all);
    totals[2] = scan_items(all) - scan_ones(all);
    totals[3] = n - scan_ones(all);
  } else {
    totals[1] = n;
    totals[2] = totals[3] = 0;
  }
}

// Unsplit plans: one thread per query tile, item q (partitions() is 1: no partial slot, no merge); thread 0 also
// writes the totals. With `keys` (persistent) it also writes the item's sort key (longest - entries) and its index
// (the sort's value).
__global__ void write_items_kernel(PrepParams p, const std::int32_t* __restrict__ tile_offsets,
                                   const std::int32_t* __restrict__ tile_ends, WorkItem* __restrict__ items,
                                   std::int32_t* __restrict__ merge_offsets, std::int32_t* __restrict__ totals,
                                   std::uint32_t longest, std::uint32_t* __restrict__ keys,
                                   std::uint32_t* __restrict__ order) {
  if (p.gated_off()) return;  // speculative preparation of a mask that did not pass (Runtime)
  const std::int32_t q = static_cast<std::int32_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (q == 0) {
    merge_offsets[0] = 0;  // {0}: nothing is split
    write_totals(p, tile_offsets, 0, totals);
  }
  if (q >= static_cast<std::int32_t>(p.q_tiles())) return;
  const QueryTile qt = query_tile(p, q);
  const std::int32_t begin = tile_offsets[qt.tile_row];
  const std::int32_t n_e = tile_row_end(tile_offsets, tile_ends, qt.tile_row) - begin;
  write_items(p, qt, begin, n_e, 0, items + q);
  if (keys) {
    keys[q] = longest - static_cast<std::uint32_t>(n_e);
    order[q] = static_cast<std::uint32_t>(q);
  }
}

// Split-KV plans, single pass: one thread per query tile, split_tiles_per_cta(p.split) tiles per CTA; the CTA scans
// its tiles' split values (cub::BlockScan) and takes its prefix from a decoupled look-back over the CTAs. The CTA's
// work items and merge targets are contiguous in the output, so they are built in shared memory and copied out
// with coalesced 16-byte stores (each thread storing its own 32-byte items at a stride of k items kept L1TEX busy:
// 36 us for 47,280 tiles, H200, bench/NOTES.md). The thread of the last query tile writes the totals, the thread
// of tile 0 merge_offsets[0].
constexpr int kStageItems = 512;  // shared-memory items per CTA: 16 KiB

/// Query tiles per CTA of the split-KV item builder: all kThreads threads unless split x tiles would overflow the
/// staging buffer (split 8: 64, ..., split 64: 8).
__host__ __device__ constexpr int split_tiles_per_cta(int split) {
  return kStageItems / split < kThreads ? kStageItems / split : kThreads;
}

__global__ void __launch_bounds__(kThreads)
    write_split_items_kernel(PrepParams p, const std::int32_t* __restrict__ tile_offsets,
                             const std::int32_t* __restrict__ tile_ends, detail::LookBackState lb,
                             WorkItem* __restrict__ items, std::int32_t* __restrict__ merge_offsets,
                             WorkItem* __restrict__ merge_targets, std::int32_t* __restrict__ totals) {
  if (p.gated_off()) return;  // speculative preparation of a mask that did not pass (Runtime)
  using BlockScan = cub::BlockScan<std::uint64_t, kThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  __shared__ int4 stage_items[kStageItems * 2];  // WorkItem = two int4
  __shared__ int4 stage_merges[kThreads * 2];
  __shared__ std::int32_t cta_ticket;
  __shared__ std::uint64_t cta_before;
  static_assert(sizeof(WorkItem) == 2 * sizeof(int4));
  const std::int32_t n = static_cast<std::int32_t>(p.q_tiles());
  const std::int32_t per_cta = split_tiles_per_cta(p.split);
  const std::int32_t tile = detail::lookback_ticket(lb, cta_ticket);
  const std::int32_t first = tile * per_cta;
  const std::int32_t q = first + static_cast<std::int32_t>(threadIdx.x);
  const bool mine = static_cast<std::int32_t>(threadIdx.x) < per_cta && q < n;
  QueryTile qt{};
  std::int32_t begin = 0, n_e = 0, k = 0;
  std::uint64_t value = 0;
  if (mine) {
    qt = query_tile(p, q);
    begin = tile_offsets[qt.tile_row];
    n_e = tile_row_end(tile_offsets, tile_ends, qt.tile_row) - begin;
    k = partitions(p, n_e);
    value = static_cast<std::uint64_t>(k) + (k == 1 ? kUnsplitOne : 0);
  }
  std::uint64_t in_cta = 0, cta_total = 0;
  BlockScan(scan_storage).ExclusiveSum(value, in_cta, cta_total);
  if (threadIdx.x < 32) {
    const std::uint64_t before = detail::lookback_exclusive(lb, tile, cta_total);
    if (threadIdx.x == 0) cta_before = before;
  }
  __syncthreads();
  if (threadIdx.x < 32) detail::lookback_finish_warp(lb, static_cast<std::int32_t>(gridDim.x));  // the rest go on
  const std::uint64_t cta_start = cta_before;
  if (mine) {
    const std::uint64_t before = cta_start + in_cta;
    const std::int32_t slot_base = scan_items(before) - scan_ones(before);
    write_items(p, qt, begin, n_e, slot_base, reinterpret_cast<WorkItem*>(stage_items) + scan_items(in_cta));
    if (k > 1) {
      const std::int32_t m = q - scan_ones(before);
      reinterpret_cast<WorkItem*>(stage_merges)[static_cast<std::int32_t>(threadIdx.x) - scan_ones(in_cta)] =
          merge_target(qt, begin, n_e);
      merge_offsets[m + 1] = slot_base + k;
    }
    if (q == 0) merge_offsets[0] = 0;
    if (q == n - 1) write_totals(p, tile_offsets, before + value, totals);
  }
  __syncthreads();
  // Coalesced copy-out: the CTA's items start at item scan_items(cta_start), its merge targets at merge index
  // first - scan_ones(cta_start).
  const std::int32_t cta_tiles = min(per_cta, n - first);
  const std::int32_t n_items = scan_items(cta_total), n_merges = cta_tiles - scan_ones(cta_total);
  int4* out_items = reinterpret_cast<int4*>(items + scan_items(cta_start));
  for (std::int32_t i = threadIdx.x; i < 2 * n_items; i += kThreads) out_items[i] = stage_items[i];
  int4* out_merges = reinterpret_cast<int4*>(merge_targets + (first - scan_ones(cta_start)));
  for (std::int32_t i = threadIdx.x; i < 2 * n_merges; i += kThreads) out_merges[i] = stage_merges[i];
}

/// CTAs of the split-KV item builder for plan p.
unsigned split_item_ctas(const PrepParams& p) {
  const std::int64_t per_cta = split_tiles_per_cta(p.split);
  return static_cast<unsigned>((p.q_tiles() + per_cta - 1) / per_cta);
}

// Persistent order: stable ascending sort of (longest - entries) = the rules' persistent_key order (decreasing
// entry count, stable), on only the bits that can differ, with the item indices as the sort's values; then a gather
// of the items. (Sorting the 32-byte items themselves as the values cost CUB's onesweep 15.5 us per pass for 47,280
// items on the H200: 42 tiles of ~1,100 items; 4-byte values give it larger tiles.) Unsplit plans get their keys
// and indices from write_items_kernel; split plans (item count known on the device only) from this kernel, which
// also gives the padding past the item count a key that sorts last.
__global__ void persistent_keys_kernel(const WorkItem* items, const std::int32_t* totals, std::int32_t bound,
                                       std::uint32_t longest, std::uint32_t* keys, std::uint32_t* order) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= bound) return;
  keys[i] = i < totals[1] ? longest - static_cast<std::uint32_t>(items[i].entry_end - items[i].entry_begin)
                          : longest + 1;
  order[i] = static_cast<std::uint32_t>(i);
}

// items[i] = unsorted[order[i]] for the item count (totals[1]); the padding past it is left as it is.
__global__ void gather_items_kernel(const WorkItem* __restrict__ unsorted, const std::uint32_t* __restrict__ order,
                                    const std::int32_t* __restrict__ totals, std::int32_t bound,
                                    WorkItem* __restrict__ items) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < bound && i < totals[1]) items[i] = unsorted[order[i]];
}

}  // namespace

std::size_t work_items_cub_temp_bytes(std::int64_t items_bound) {
  std::size_t sort = 0;
  if (items_bound == 0) return 0;  // no persistent sort
  TESSERA_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort, static_cast<std::uint32_t*>(nullptr),
                                                     static_cast<std::uint32_t*>(nullptr),
                                                     static_cast<std::uint32_t*>(nullptr),
                                                     static_cast<std::uint32_t*>(nullptr),
                                                     static_cast<int>(items_bound)));
  return sort;
}

void build_work_items_gpu(const PrepParams& p, ItemBuffers& b, bool persistent, std::int64_t items_bound,
                          cudaStream_t stream) {
  const std::int64_t n = p.q_tiles();
  const bool split = p.split > 1;
  const bool sort = persistent && items_bound > 0;
  // Longest possible row: every unit of the kv space present (span: r_kv entries each; packed: one slot each).
  const std::int64_t longest = static_cast<std::int64_t>(row_units(p)) * (p.pack ? 1 : p.r_kv);
  // The persistent list is written to items_alt, its order sorted, then gathered into items.
  WorkItem* unsorted = sort ? b.items_alt : b.items;
  if (split) {
    write_split_items_kernel<<<split_item_ctas(p), kThreads, 0, stream>>>(
        p, b.tile_offsets, b.tile_ends, detail::lookback_state(b.lookback), unsorted, b.merge_offsets,
        b.merge_targets, b.totals);
  } else {
    write_items_kernel<<<blocks_for(std::max<std::int64_t>(n, 1)), kThreads, 0, stream>>>(
        p, b.tile_offsets, b.tile_ends, unsorted, b.merge_offsets, b.totals,
        static_cast<std::uint32_t>(longest), sort ? b.keys : nullptr, sort ? b.order_alt : nullptr);
  }
  TESSERA_CUDA_CHECK_LAUNCH();
  if (sort) {
    int end_bit = 1;
    while ((std::int64_t{1} << end_bit) <= longest + 1) ++end_bit;
    const auto bound = static_cast<std::int32_t>(items_bound);
    if (split) {
      persistent_keys_kernel<<<blocks_for(items_bound), kThreads, 0, stream>>>(
          b.items_alt, b.totals, bound, static_cast<std::uint32_t>(longest), b.keys, b.order_alt);
      TESSERA_CUDA_CHECK_LAUNCH();
    }
    std::size_t temp = b.cub_temp_bytes;
    TESSERA_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(b.cub_temp, temp, b.keys, b.keys_alt, b.order_alt, b.order,
                                                       bound, 0, end_bit, stream));
    gather_items_kernel<<<blocks_for(items_bound), kThreads, 0, stream>>>(b.items_alt, b.order, b.totals, bound,
                                                                          b.items);
    TESSERA_CUDA_CHECK_LAUNCH();
  }
}

std::int64_t work_items_lookback_words(const PrepParams& p) {
  return p.split > 1 ? detail::lookback_words(split_item_ctas(p)) : 0;
}

}  // namespace tessera::prep
