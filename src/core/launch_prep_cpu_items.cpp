// CPU twin of the work-item builder: one item per query tile, or one per split-KV partition with partial slots and
// the merge index.
#include "core/launch_prep.hpp"

namespace tessera {

void build_work_items_cpu(const prep::PrepParams& p, HostTileMetadata& out) {
  out.items.clear();
  out.merge_targets.clear();
  out.merge_offsets.assign(1, 0);
  std::int32_t slots = 0;
  const std::int64_t q_tiles = p.q_tiles();
  for (std::int64_t q = 0; q < q_tiles; ++q) {
    const QueryTile qt = prep::query_tile(p, q);
    const std::int32_t begin = out.tile_row_offsets[qt.tile_row];
    const std::int32_t n_e = out.tile_row_offsets[qt.tile_row + 1] - begin;
    const std::int32_t k = prep::partitions(p, n_e);
    const std::size_t at = out.items.size();
    out.items.resize(at + k);
    prep::write_items(p, qt, begin, n_e, slots, out.items.data() + at);
    if (k > 1) {
      slots += k;
      out.merge_targets.push_back(prep::merge_target(qt, begin, n_e));
      out.merge_offsets.push_back(slots);
    }
  }
  out.n_partials = slots;
}

}  // namespace tessera
