// CPU twin of the traversal-order builder.
#include "core/launch_prep.hpp"

namespace tessera {

void apply_traversal_cpu(const prep::PrepParams& p, HostTileMetadata& out) {
  if (p.traversal == 0) return;
  const std::vector<std::int32_t> kv_in = out.kv_tile;
  const std::vector<std::uint64_t> mem_in = out.member;
  const std::vector<std::int32_t> gather_in = out.gather_blocks;
  const std::int64_t rows = p.tile_rows();
  const std::int64_t g = p.pack ? p.pack : 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t o = out.tile_row_offsets[r];
    const std::int32_t n = out.tile_row_offsets[r + 1] - out.tile_row_offsets[r];
    prep::reorder_tile_row(p, n, kv_in.data() + (g ? 0 : o), mem_in.data() + (p.membership ? o : 0),
                           gather_in.data() + o * g, out.kv_tile.data() + (g ? 0 : o),
                           out.member.data() + (p.membership ? o : 0), out.gather_blocks.data() + o * g);
  }
}

}  // namespace tessera
