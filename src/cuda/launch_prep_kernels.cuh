#pragma once
// Internal interface between the GPU launch-preparation driver (launch_prep.cu) and its builders.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/launch_prep_rules.hpp"

namespace tessera::prep {

/// Device arrays of the tile-row builder. tmp_* and runs are used only for run-major traversal: with
/// run_major_in_emission(p) runs only ([mask nnz] int32), else all ([entries] each: ascending scratch + reorder).
struct TileRowBuffers {
  std::int32_t* tile_offsets;  ///< [rows + 1]
  /// [rows], or null: where non-null, the builder writes the row-aligned layout (TileMetadataView): row t's entries
  /// at tile_offsets[t] = r_kv * mu(M)'s offset of its first logical row, its end in tile_ends[t], and
  /// tile_offsets[rows] = r_kv * nnz; no look-back. Only for layouts row_aligned_gpu() accepts.
  std::int32_t* tile_ends;
  std::int32_t* kv_tile;       ///< [entries] span forms
  void* member;                ///< [entries] words of member_bytes(p) bytes, with membership (size a multiple of 4 B)
  std::int32_t* gather;        ///< [entries * pack] packed form
  std::int32_t* tmp_kv;
  void* tmp_member;            ///< as member
  std::int32_t* tmp_gather;
  std::int32_t* runs;
  std::uint64_t* lookback;     ///< [tile_rows_lookback_words(p)], zero between launches (single-pass builder)
  void* cub_temp;
  std::size_t cub_temp_bytes;
};


/// Look-back state words (launch_prep_lookback.cuh) of the single-pass tile-row builder.
std::int64_t tile_rows_lookback_words(const PrepParams& p);

/// Whether one launch builds the tile rows of plan `p` (no count pass, no scan): the streaming builder when
/// c_q == 1 (any KV mapping, any row length), else the single-pass bitmap builder (span and packed KV) when its CTA
/// row bitmaps fit in shared memory.
bool tile_rows_single_pass_fits(const PrepParams& p);

/// Streaming tile-row builder for c_q == 1 (launch_prep_rows_stream.cu): writes the rows' entries (kv_tile or
/// gather, member: c_q == 1, so one byte per entry) in the plan's traversal order (run-major included: no reorder
/// pass follows) and, unless tile_offsets_are_mask_offsets(p), tile_offsets (look-back state `lookback` as for the
/// single-pass builder). runs: run-major scratch, at least mask nnz int32 (unused for other traversals). Returns false
/// without launching anything when p.c_q != 1 or there are no rows.
/// tile_ends: non-null for the row-aligned layout (linear orders only; TileRowBuffers::tile_ends), else compact.
bool build_tile_rows_stream(const PrepParams& p, const std::int32_t* row_offsets, const std::int32_t* cols,
                            std::int32_t* tile_offsets, std::int32_t* tile_ends, std::uint64_t* lookback,
                            std::int32_t* kv_tile, std::uint8_t* member, std::int32_t* gather, std::int32_t* runs,
                            cudaStream_t stream);

/// Whether the tile-row builder writes run-major order itself (c_q == 1: the streaming builder), so run-major needs
/// no ascending scratch copy and no reorder launch; the scratch `runs` then needs mask nnz words (else entries).
inline bool run_major_in_emission(const PrepParams& p) { return p.c_q == 1; }

/// Persistent form of the streaming builder (launch_prep_rows_stream_persistent.cu): the same output as
/// build_tile_rows_stream, from one resident grid whose CTAs take 32-row tickets in a loop and overlap each ticket's
/// look-back with the next ticket's counting. Returns false without launching anything when the streaming builder
/// would not need a look-back (tile_offsets_are_mask_offsets), for run-major traversal (the streaming builder writes
/// it directly), when p.c_q != 1 or there are no rows, or when the kernel cannot run on the current device.
bool launch_tile_rows_stream_persistent(const PrepParams& p, const std::int32_t* row_offsets, const std::int32_t* cols,
                                        std::int32_t* tile_offsets, std::uint64_t* lookback, std::int32_t* kv_tile,
                                        std::uint8_t* member, std::int32_t* gather, cudaStream_t stream);

/// Single-pass bitmap tile-row builder (launch_prep_rows_single_pass.cu), for c_q > 1: writes the rows' entries
/// (kv_tile or gather, member: words of c_q bytes, MemberWord<c_q>) in ascending or descending traversal order, and
/// tile_offsets. Returns false without launching anything when c_q == 1 or the bitmaps do not fit.
/// tile_ends: non-null for the row-aligned layout (ascending or descending order; no look-back), else compact.
bool build_tile_rows_single_pass(const PrepParams& p, const std::int32_t* row_offsets, const std::int32_t* cols,
                                 std::int32_t* tile_offsets, std::int32_t* tile_ends, std::uint64_t* lookback,
                                 std::int32_t* kv_tile, void* member, std::int32_t* gather, cudaStream_t stream);

/// Whether the GPU builders can write plan `p`'s tile rows row-aligned (TileRowBuffers::tile_ends) rather than
/// compact: prep::prefer_row_aligned (offsets not mu(M)'s own, ascending or descending traversal) and a single-launch
/// builder (c_q == 1, or the c_q > 1 bitmaps fit). The forced compact builders (RowBuilder::kStreaming,
/// kPersistent) pass no tile_ends and ignore it.
bool row_aligned_gpu(const PrepParams& p);

/// Builds the tile rows (single pass, else count + scan + fill), then applies the traversal order.
/// persistent_stream: where the streaming builder needs a look-back, run its persistent form
/// (launch_tile_rows_stream_persistent) instead. launch_prep_tiles.cu.
void build_tile_rows_gpu(const PrepParams& p, const std::int32_t* row_offsets, const std::int32_t* cols,
                         TileRowBuffers& b, cudaStream_t stream, bool persistent_stream = false);
std::size_t tile_rows_cub_temp_bytes(std::int64_t rows);

/// Device arrays of the work-item builder.
struct ItemBuffers {
  const std::int32_t* tile_offsets;  ///< [rows + 1] tile rows' first entries (row-aligned: [rows] = the extent)
  const std::int32_t* tile_ends;     ///< [rows] row-aligned layout, or null (compact CSR)
  WorkItem* items;          ///< [items bound]
  std::int32_t* merge_offsets;  ///< [q_tiles + 1]
  WorkItem* merge_targets;  ///< [q_tiles]
  std::uint64_t* lookback;  ///< [work_items_lookback_words(p)], zero between launches (split-KV single pass)
  // persistent order
  std::uint32_t* keys;
  std::uint32_t* keys_alt;
  std::uint32_t* order;      ///< [items bound] item indices, the sort's values
  std::uint32_t* order_alt;
  WorkItem* items_alt;
  void* cub_temp;
  std::size_t cub_temp_bytes;
  std::int32_t* totals;     ///< [4]: entries (row-aligned: the arrays' extent), items, partials, merges
};

/// Work items, split-KV partitions, partial slots, merge index; persistent longest-first order; totals.
/// launch_prep_items.cu. `items_bound` is the allocated item capacity (persistent sort length = actual count,
/// read on the device).
void build_work_items_gpu(const PrepParams& p, ItemBuffers& b, bool persistent, std::int64_t items_bound,
                          cudaStream_t stream);
/// CUB temporary bytes of the persistent sort of `items_bound` items (0: no sort).
std::size_t work_items_cub_temp_bytes(std::int64_t items_bound);
/// Look-back state words (launch_prep_lookback.cuh) of the split-KV item builder (0 when unsplit).
std::int64_t work_items_lookback_words(const PrepParams& p);

}  // namespace tessera::prep
