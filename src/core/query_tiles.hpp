#pragma once
// Query tiles: decoding the launch index q = (b * H_q + h) * q_tiles_per_head + qt into (batch, head, tokens, tile
// row), and the work item of an unsplit plan's query tile. Shared by the launch-preparation rules (CPU twins and GPU
// builders, launch_prep_rules.hpp) and the attention kernels (implicit work items, TileMetadataView).
#include <cstdint>

#include "core/hd.hpp"
#include "core/tile_metadata.hpp"

namespace tessera {

/// A query tile: (b, h, qt) in launch order index q = (b * H_q + h) * q_tiles_per_head + qt.
struct QueryTile {
  std::int32_t batch, head, q_start, q_len, tile_row;
};

/// Decodes query tile q and finds its tile row (broadcast mask extents; Refined-Q reuses the logical row). q and the
/// query-tile counts fit in 31 bits (make_prep_params checks that every count fits int32), so the decoding divides in
/// 32 bits: on the GPU a 64-bit division is a called routine of about 70 instructions, a 32-bit one inline.
TESSERA_HD inline QueryTile query_tile(const QueryTileGeometry& g, std::int64_t q) {
  const auto per_head = static_cast<std::uint32_t>(g.q_tiles_per_head);
  const auto heads = static_cast<std::uint32_t>(g.heads_q);
  const auto q32 = static_cast<std::uint32_t>(q);
  const std::int64_t qt = q32 % per_head;
  const std::uint32_t bh = q32 / per_head;
  const std::int64_t h = bh % heads;
  const std::int64_t b = bh / heads;
  const std::int64_t bm = g.mask_batch == 1 ? 0 : b;
  const std::int64_t hm = g.mask_heads == 1 ? 0 : h;
  const std::int64_t t = static_cast<std::uint32_t>(qt) / static_cast<std::uint32_t>(g.r_q);  // Refined-Q: the logical row
  QueryTile r;
  r.batch = static_cast<std::int32_t>(b);
  r.head = static_cast<std::int32_t>(h);
  r.q_start = static_cast<std::int32_t>(qt * g.tile_q);
  const std::int64_t rest = g.n_q - qt * g.tile_q;
  r.q_len = static_cast<std::int32_t>(rest < g.tile_q ? rest : g.tile_q);
  r.tile_row = static_cast<std::int32_t>((bm * g.mask_heads + hm) * g.rows_per_head + t);
  return r;
}

/// The work item of query tile q of an unsplit plan (split 1): the query tile over its whole tile row, written
/// directly (partial -1). tile_offsets: the tile rows' first entries [tile rows + 1]; tile_ends: their ends [tile
/// rows] (row-aligned layout) or null (compact CSR: the end is the next row's offset), as in TileMetadataView. This
/// is what the work-item builders write for such a plan, and what a kernel computes when the plan's items are
/// implicit.
TESSERA_HD inline WorkItem unsplit_item(const QueryTileGeometry& g, const std::int32_t* tile_offsets,
                                        const std::int32_t* tile_ends, std::int64_t q) {
  const QueryTile qt = query_tile(g, q);
  WorkItem w;
  w.batch = qt.batch;
  w.head = qt.head;
  w.q_start = qt.q_start;
  w.q_len = qt.q_len;
  w.entry_begin = tile_offsets[qt.tile_row];
  w.entry_end = tile_row_end(tile_offsets, tile_ends, qt.tile_row);
  w.tile_row = qt.tile_row;
  w.partial = -1;
  return w;
}

}  // namespace tessera
