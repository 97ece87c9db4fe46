// CPU twin of the tile-row builders (refined, coarsened-span with membership, packed KV, Direct).
#include "core/launch_prep.hpp"

namespace tessera {

void build_tile_rows_cpu(const prep::PrepParams& p, const HostMaskState& mask, HostTileMetadata& out) {
  const std::int64_t rows = p.tile_rows();
  out.tile_row_offsets.assign(rows + 1, 0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int32_t n =
        prep::build_tile_row(p, mask.row_offsets.data(), mask.col_indices.data(), r, nullptr, nullptr, nullptr);
    out.tile_row_offsets[r + 1] = out.tile_row_offsets[r] + n;
  }
  const std::int64_t n_entries = out.tile_row_offsets[rows];
  out.kv_tile.assign(p.pack ? 0 : n_entries, 0);
  out.member.assign(p.membership ? n_entries : 0, 0);
  out.gather_blocks.assign(p.pack ? n_entries * p.pack : 0, 0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t o = out.tile_row_offsets[r];
    prep::build_tile_row(p, mask.row_offsets.data(), mask.col_indices.data(), r,
                         p.pack ? nullptr : out.kv_tile.data() + o, p.membership ? out.member.data() + o : nullptr,
                         p.pack ? out.gather_blocks.data() + o * p.pack : nullptr);
  }
}

}  // namespace tessera
