#pragma once
// Work item i of a launch, as every kernel family reads it: from the plan's list, or computed from the query-tile
// geometry for implicit items (core/query_tiles.hpp's unsplit_item).
#include <cstdint>

#include "core/query_tiles.hpp"
#include "core/tile_metadata.hpp"
#include "kernels/launch.hpp"

namespace tessera::kernels {

/// Work item i (0 <= i < p.meta.n_items) of the launch described by p.
__device__ __forceinline__ WorkItem work_item(const AttentionParams& p, std::int32_t i) {
  return p.meta.implicit_items
             ? unsplit_item(p.meta.query_geometry, p.meta.tile_row_offsets, p.meta.tile_row_ends, i)
             : p.meta.items[i];
}

}  // namespace tessera::kernels
