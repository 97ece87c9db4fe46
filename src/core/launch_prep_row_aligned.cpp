// The row-aligned tile-row layout on the host: compacting a GPU result into the CSR the CPU twins write
// (download_tile_metadata), and spreading a compact result into the aligned layout (tests). core/launch_prep.hpp;
// the layout is described in core/tile_metadata.hpp (TileMetadataView::tile_row_ends) and docs/plans.md.
#include <algorithm>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/launch_prep.hpp"
#include "tessera/error.hpp"

namespace tessera {

namespace {

[[noreturn]] void bad(const char* what, const std::string& why) { throw Error(ErrorCode::kInternal, what, why); }

// Moves every row's entries (lengths[t] of them) from position from[t] to to[t] into arrays of n_new entries (the
// rest `fill`), shifts each item and merge target by its row's move, and makes `to` [rows + 1] the offsets.
void move_rows(HostTileMetadata& md, const std::vector<std::int32_t>& from, const std::vector<std::int32_t>& to,
               const std::vector<std::int32_t>& lengths, std::int64_t n_new, std::int32_t fill) {
  const prep::PrepParams& p = md.params;
  const auto rows = static_cast<std::int64_t>(lengths.size());
  auto move = [&](auto& arr, std::int64_t width, auto fill_value) {
    if (arr.empty()) return;
    std::remove_reference_t<decltype(arr)> out(static_cast<std::size_t>(n_new * width), fill_value);
    for (std::int64_t t = 0; t < rows; ++t)
      for (std::int64_t k = 0; k < std::int64_t{lengths[t]} * width; ++k)
        out[static_cast<std::size_t>(to[t] * width + k)] = arr[static_cast<std::size_t>(from[t] * width + k)];
    arr = std::move(out);
  };
  move(md.kv_tile, 1, fill);
  move(md.member, 1, static_cast<std::uint64_t>(static_cast<std::uint32_t>(fill)));
  move(md.gather_blocks, p.pack, fill);
  auto shift = [&](std::vector<WorkItem>& list, const char* what) {
    for (WorkItem& w : list) {
      if (w.tile_row < 0 || w.tile_row >= rows) bad(what, "tile_row " + std::to_string(w.tile_row) + " out of range");
      const std::int32_t t = w.tile_row;
      if (w.entry_begin < from[t] || w.entry_end < w.entry_begin || w.entry_end > from[t] + lengths[t])
        bad(what, "entry range [" + std::to_string(w.entry_begin) + ", " + std::to_string(w.entry_end) +
                      ") outside tile row " + std::to_string(t));
      w.entry_begin += to[t] - from[t];
      w.entry_end += to[t] - from[t];
    }
  };
  shift(md.items, "metadata.items");
  shift(md.merge_targets, "metadata.merge_targets");
  md.tile_row_offsets = to;
}

}  // namespace

void compact_row_aligned(HostTileMetadata& md, const std::vector<std::int32_t>& ends) {
  const std::vector<std::int32_t>& off = md.tile_row_offsets;
  const auto rows = static_cast<std::int64_t>(ends.size());
  if (static_cast<std::int64_t>(off.size()) != rows + 1)
    bad("metadata.tile_row_ends", "has " + std::to_string(rows) + " rows, offsets " + std::to_string(off.size()));
  const std::int64_t extent = off.back();
  const std::int64_t have = !md.kv_tile.empty()          ? static_cast<std::int64_t>(md.kv_tile.size())
                            : !md.gather_blocks.empty() ? static_cast<std::int64_t>(md.gather_blocks.size()) /
                                                              std::max(md.params.pack, 1)
                                                        : extent;
  if (have != extent) bad("metadata.tile_row_ends", "extent " + std::to_string(extent) + " but arrays of " +
                                                        std::to_string(have) + " entries");
  std::vector<std::int32_t> to(static_cast<std::size_t>(rows + 1), 0), lengths(static_cast<std::size_t>(rows));
  for (std::int64_t t = 0; t < rows; ++t) {
    if (off[t] < 0 || ends[t] < off[t] || ends[t] > off[t + 1])
      bad("metadata.tile_row_ends", "tile row " + std::to_string(t) + ": [" + std::to_string(off[t]) + ", " +
                                        std::to_string(ends[t]) + ") is not inside its span ending at " +
                                        std::to_string(off[t + 1]));
    lengths[t] = ends[t] - off[t];
    to[t + 1] = to[t] + lengths[t];
  }
  const std::vector<std::int32_t> from = off;
  move_rows(md, from, to, lengths, to[rows], 0);
}

std::vector<std::int32_t> spread_row_aligned(HostTileMetadata& md, const std::vector<std::int32_t>& mask_row_offsets,
                                             std::int32_t fill) {
  const prep::PrepParams& p = md.params;
  const std::int64_t rows = p.tile_rows();
  std::vector<std::int32_t> to(static_cast<std::size_t>(rows + 1)), lengths(static_cast<std::size_t>(rows)),
      ends(static_cast<std::size_t>(rows));
  for (std::int64_t t = 0; t < rows; ++t) {
    const std::int64_t mh = t / p.rows_per_head, tr = t % p.rows_per_head;
    to[t] = mask_row_offsets[static_cast<std::size_t>(mh * p.n_qb + tr * p.c_q)] * p.r_kv;
    lengths[t] = md.tile_row_offsets[t + 1] - md.tile_row_offsets[t];
    ends[t] = to[t] + lengths[t];
  }
  to[rows] = mask_row_offsets.back() * p.r_kv;
  const std::vector<std::int32_t> from = md.tile_row_offsets;
  move_rows(md, from, to, lengths, to[rows], fill);
  return ends;
}

}  // namespace tessera
