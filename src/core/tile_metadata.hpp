#pragma once
// Launch metadata: the contract between launch preparation (src/core + src/cuda builders, CPU twins) and the
// executors (CPU plan executor in src/cpu, attention kernels in src/kernels). Plain structs usable from host
// and device code. DESIGN.md sections 3 and 5.
//
// Terms. A *physical tile* covers T_Q query tokens x T_KV kv tokens. The *tile grid* of one mask head
// (b_m, h_m) has n_qt = ceil(N_q / T_Q) tile rows. A *tile row* lists its KV tiles (entries) in a CSR:
//   tile_row_offsets[row .. row+1) -> entries (compact), or tile_row_offsets[row] .. tile_row_ends[row] when
//   tile_row_ends is set (row-aligned; TileMetadataView); row numbering = (b_m * H_m + h_m) * n_rows_per_head + r.
// Each entry is one KV tile, visited in list order (the traversal order is the order the builder wrote).
//
//  - Span KV tiles (Direct, Coarsened-span, Refined): entry e covers kv tokens
//      [kv_tile[e] * T_KV, min(N_kv, (kv_tile[e] + 1) * T_KV)).
//  - Packed (gathered) KV tiles, c_kv logical blocks per tile: entry e covers the logical kv blocks
//      gather_blocks[e * c_kv + j], j < c_kv (value -1 = empty slot, contributes nothing), each B_KV tokens
//      (the last block of the sequence may be ragged). kv_tile[e] is unused (0).
//  - Membership: member[e] (null array = every pair of the tile is active) has bit (qi * 8 + kj) set when
//    query sub-block qi and kv sub-block kj of the tile are an active pair. Sub-blocks are logical blocks
//    (B_Q and B_KV tokens) on a coarsened dimension; on a Direct or Refined dimension the index is always 0.
//    Inactive pairs are masked to -inf before the online-softmax update. Entry e's word is member_bytes bytes
//    (little-endian, read zero-extended by member_bits()): qi < c_q, so only 8 * c_q bits are ever used, and the
//    GPU builders store c_q bytes per entry (store traffic of launch preparation); host metadata uses 8.
//
// A *work item* is what one CTA (or one step of a persistent CTA) computes: one query tile of one (b, h) over a
// contiguous range of its tile row's entries. With split-KV several items share a query tile, each writing a
// partial (O, LSE) to the workspace; the merge index then combines them.
#include <cstdint>
#include <type_traits>

#include "core/hd.hpp"

namespace tessera {

/// Largest coarsening / refinement factor per dimension (membership uses 8 bits per query sub-block).
inline constexpr int kMaxMappingFactor = 8;

/// One unit of CTA work. 32 bytes, 16-byte aligned so that device code reads and writes an item with two 16-byte
/// accesses instead of eight 4-byte ones (the GPU work-item builders' stores were L1TEX-bound, bench/NOTES.md).
struct alignas(16) WorkItem {
  std::int32_t batch;         ///< b in [0, B)
  std::int32_t head;          ///< query head h in [0, H_q); kv head = h / (H_q / H_kv)
  std::int32_t q_start;       ///< first query token of the tile (tokens past N_q are never read or written)
  std::int32_t q_len;         ///< query tokens in the tile, 1..T_Q
  std::int32_t entry_begin;   ///< first entry (KV tile) of this item
  std::int32_t entry_end;     ///< one past the last entry; entry_begin == entry_end: empty row -> O = 0, LSE = -inf
  std::int32_t tile_row;      ///< the tile row (CSR row of the entries) this item reads; for tools and checks
  std::int32_t partial;       ///< -1: write O / LSE directly; >= 0: write partial slot `partial` of the workspace
};
static_assert(sizeof(WorkItem) == 32 && alignof(WorkItem) == 16);

/// How query tiles are numbered and find their tile rows: query tile q = (b * H_q + h) * q_tiles_per_head + qt
/// (core/query_tiles.hpp decodes it). Filled by launch preparation; used by kernels for implicit work items.
struct QueryTileGeometry {
  std::int64_t q_tiles_per_head = 0;  ///< ceil(N_q / T_Q)
  std::int64_t heads_q = 1;           ///< H_q
  std::int64_t mask_batch = 1;        ///< B_m (1: the mask is broadcast over the batch)
  std::int64_t mask_heads = 1;        ///< H_m (1: broadcast over the heads)
  std::int64_t r_q = 1;               ///< Refined-Q factor: r_q query tiles share one logical tile row
  std::int64_t tile_q = 0;            ///< T_Q (tokens)
  std::int64_t n_q = 0;               ///< N_q (tokens)
  std::int64_t rows_per_head = 0;     ///< tile rows per mask head
};

/// Device (or host) pointers to one prepared plan's metadata. Arrays a mapping does not need are null.
struct TileMetadataView {
  const WorkItem* items = nullptr;           ///< [n_items], in launch order (the grouping / ordering is the plan's)
  std::int32_t n_items = 0;
  /// Implicit work items (items == nullptr, n_items = query tiles): an unsplit, non-persistent plan's item q is
  /// query tile q over its whole tile row, which kernels compute (unsplit_item in core/query_tiles.hpp) from this
  /// geometry and tile_row_offsets instead of reading a list. Valid when implicit_items != 0.
  std::int32_t implicit_items = 0;
  QueryTileGeometry query_geometry;
  const std::int32_t* kv_tile = nullptr;     ///< [n_entries] span tile index (span forms)
  /// [n_entries] membership words of member_bytes bytes each (read them with member_bits()), or null = all active.
  const void* member = nullptr;
  /// Bytes per membership word: 1, 2, 4 or 8, at least the tile's query sub-block count (c_q); device metadata from
  /// launch preparation uses c_q (prep::member_bytes), host metadata 8. Unused (0) when member is null.
  std::int32_t member_bytes = 0;
  const std::int32_t* gather_blocks = nullptr;  ///< [n_entries * c_kv] packed KV logical block indices, or null
  std::int32_t c_kv_gather = 0;              ///< c_kv of the packed form (0 when not packed)
  std::int64_t n_entries = 0;
  // Split-KV merge index: for each merged query tile m, its partial slots are
  // merge_offsets[m] .. merge_offsets[m+1) (contiguous slot numbers), and merge_items[m] is the WorkItem-shaped
  // description of the destination (batch, head, q_start, q_len).
  const std::int32_t* merge_offsets = nullptr;  ///< [n_merge + 1]
  const WorkItem* merge_targets = nullptr;      ///< [n_merge]
  std::int32_t n_merge = 0;
  std::int32_t n_partials = 0;                  ///< workspace partial slots: O_partial fp32 [n_partials, T_Q, D],
                                                ///< LSE_partial fp32 [n_partials, T_Q]
  // ---- Added by the plan layer (launch preparation). Kernels may ignore what they get elsewhere. ----
  // Tile geometry in tokens. A query token i of item w has query sub-block qi = (i - w.q_start) / sub_q; a kv token
  // of a span entry has kv sub-block kj = (token - kv_tile[e] * tile_kv) / sub_kv; slot j of a packed entry has
  // kj = j. sub_q = B_Q on a Coarsened Q dimension, else T_Q (qi always 0); sub_kv = B_KV on a Coarsened-span KV
  // dimension, else T_KV (kj always 0). block_kv = B_KV (packed slots cover B_KV tokens each).
  std::int32_t tile_q = 0;
  std::int32_t tile_kv = 0;
  std::int32_t sub_q = 0;
  std::int32_t sub_kv = 0;
  std::int32_t block_kv = 0;
  // Task organization: CTA c runs items [c * items_per_cta, (c + 1) * items_per_cta) (clamped to n_items); with
  // `persistent` != 0, CTAs instead pull the next items_per_cta items from the list (already longest first).
  // (The kernels run one item per CTA, or, persistent on entries with CatalogEntry::persistent_ctas, one item at a
  // time: items_per_cta is 1 in every plan the runtime enumerates.)
  std::int32_t items_per_cta = 1;
  std::int32_t persistent = 0;
  /// Persistent CTAs' ticket counter (src/kernels/wgmma/scheduler.cuh): one word of device memory, which the kernel
  /// launcher clears on the launch's stream before each persistent launch and the launch leaves at n_items. Required
  /// when `persistent` != 0; launches that share it must not overlap. Null otherwise.
  std::uint32_t* item_counter = nullptr;
  // Tile rows (kernels read entry ranges from the work items, or from these for implicit items):
  //  - compact CSR (tile_row_ends null): entries of tile row t are tile_row_offsets[t] .. tile_row_offsets[t + 1);
  //  - row-aligned (tile_row_ends set; device metadata of the linear-order GPU builders, docs/plans.md): entries of
  //    tile row t are tile_row_offsets[t] .. tile_row_ends[t], where tile_row_offsets[t] = r_kv times mu(M)'s offset
  //    of the row's first logical row, a position fixed before any row is counted (no prefix sum over rows); the
  //    gaps between rows hold nothing and are never read. tile_row_offsets[n_tile_rows] = the arrays' extent.
  const std::int32_t* tile_row_offsets = nullptr;  ///< [n_tile_rows + 1]
  const std::int32_t* tile_row_ends = nullptr;     ///< [n_tile_rows] or null (compact CSR)
  std::int32_t n_tile_rows = 0;
};

/// One past the last entry of tile row t: tile_row_ends[t] (row-aligned layout) or tile_row_offsets[t + 1] (compact
/// CSR, tile_row_ends null). Host and device.
TESSERA_HD inline std::int32_t tile_row_end(const std::int32_t* tile_row_offsets, const std::int32_t* tile_row_ends,
                                            std::int64_t t) {
  return tile_row_ends != nullptr ? tile_row_ends[t] : tile_row_offsets[t + 1];
}

/// The unsigned integer of kBytes bytes (1, 2, 4 or 8): the type of one membership word of that width.
template <int kBytes>
using MemberWord =
    std::conditional_t<kBytes == 1, std::uint8_t,
                       std::conditional_t<kBytes == 2, std::uint16_t,
                                          std::conditional_t<kBytes == 4, std::uint32_t, std::uint64_t>>>;

/// *p, on the device through the read-only data cache (__ldg): metadata arrays do not change during a launch.
template <class T>
TESSERA_HD inline T load_read_only(const T* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}

/// Membership bits of entry e of a member array of `bytes` bytes per word (1, 2, 4 or 8), zero-extended to 64 bits.
TESSERA_HD inline std::uint64_t member_bits(const void* member, std::int32_t bytes, std::int64_t e) {
  switch (bytes) {
    case 1: return load_read_only(static_cast<const std::uint8_t*>(member) + e);
    case 2: return load_read_only(static_cast<const std::uint16_t*>(member) + e);
    case 4: return load_read_only(static_cast<const std::uint32_t*>(member) + e);
    default: return load_read_only(static_cast<const unsigned long long*>(member) + e);
  }
}

}  // namespace tessera
