// Invariants of prepared launch metadata (tests and tools).
#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "core/launch_prep.hpp"
#include "tessera/error.hpp"

namespace tessera {

namespace {
[[noreturn]] void violated(const char* arr, const std::string& msg) {
  throw Error(ErrorCode::kInternal, std::string("metadata.") + arr, msg);
}
}  // namespace

void check_tile_metadata(const HostTileMetadata& md) {
  const prep::PrepParams& p = md.params;
  const std::int64_t rows = p.tile_rows();
  if (static_cast<std::int64_t>(md.tile_row_offsets.size()) != rows + 1 || md.tile_row_offsets[0] != 0)
    violated("tile_row_offsets", fmt::format("size {} (expected {}) or first != 0", md.tile_row_offsets.size(), rows + 1));
  for (std::int64_t r = 0; r < rows; ++r) {
    if (md.tile_row_offsets[r + 1] < md.tile_row_offsets[r]) violated("tile_row_offsets", fmt::format("decreases at {}", r));
  }
  const std::int64_t n = md.n_entries();
  if (p.pack) {
    if (!md.kv_tile.empty() || static_cast<std::int64_t>(md.gather_blocks.size()) != n * p.pack)
      violated("gather_blocks", "size mismatch for the packed form");
  } else if (static_cast<std::int64_t>(md.kv_tile.size()) != n || !md.gather_blocks.empty()) {
    violated("kv_tile", "size mismatch for the span form");
  }
  if (static_cast<std::int64_t>(md.member.size()) != (p.membership ? n : 0)) violated("member", "size mismatch");
  const int kv_sub = p.pack ? p.pack : p.c_kv;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t t = r % p.rows_per_head;
    const std::int64_t q_sub = std::min<std::int64_t>(p.c_q, p.n_qb - t * p.c_q);
    for (std::int64_t e = md.tile_row_offsets[r]; e < md.tile_row_offsets[r + 1]; ++e) {
      int slots = 1;
      if (p.pack) {
        slots = 0;
        for (int j = 0; j < p.pack; ++j) {
          const std::int32_t g = md.gather_blocks[e * p.pack + j];
          if (g == -1) continue;
          if (g < 0 || g >= p.n_kvb || j != slots) violated("gather_blocks", fmt::format("entry {} slot {} = {}", e, j, g));
          ++slots;
        }
        if (slots == 0) violated("gather_blocks", fmt::format("entry {} is empty", e));
      } else if (md.kv_tile[e] < 0 || md.kv_tile[e] >= p.kv_tiles) {
        violated("kv_tile", fmt::format("entry {} = {} out of [0, {})", e, md.kv_tile[e], p.kv_tiles));
      }
      if (p.membership) {
        const std::uint64_t bits = md.member[e];
        if (bits == 0) violated("member", fmt::format("entry {} has no active pair", e));
        for (int b = 0; b < 64; ++b) {
          if (!((bits >> b) & 1)) continue;
          const int qi = b / 8, kj = b % 8;
          if (qi >= q_sub || kj >= (p.pack ? slots : kv_sub))
            violated("member", fmt::format("entry {} bit ({}, {}) outside the tile's sub-blocks", e, qi, kj));
        }
      }
    }
  }
  // Items: group by query tile; ranges must partition the tile row; partial slots used once.
  std::map<std::tuple<int, int, int>, std::vector<const WorkItem*>> by_tile;
  std::vector<int> slot_used(md.n_partials, 0);
  for (const WorkItem& w : md.items) {
    if (w.q_len < 1 || w.q_len > p.tile_q || w.q_start < 0 || w.q_start + w.q_len > p.n_q)
      violated("items", fmt::format("query range [{}, +{}) invalid", w.q_start, w.q_len));
    if (w.tile_row < 0 || w.tile_row >= rows) violated("items", fmt::format("tile_row {} out of range", w.tile_row));
    if (w.partial >= md.n_partials || w.partial < -1) violated("items", fmt::format("partial {} out of range", w.partial));
    if (w.partial >= 0 && slot_used[w.partial]++) violated("items", fmt::format("partial slot {} used twice", w.partial));
    by_tile[{w.batch, w.head, w.q_start}].push_back(&w);
  }
  if (static_cast<std::int64_t>(by_tile.size()) != p.q_tiles())
    violated("items", fmt::format("{} query tiles covered, expected {}", by_tile.size(), p.q_tiles()));
  for (auto& [key, list] : by_tile) {
    std::sort(list.begin(), list.end(), [](auto* a, auto* b) { return a->entry_begin < b->entry_begin; });
    const std::int32_t row = list[0]->tile_row;
    std::int32_t at = md.tile_row_offsets[row];
    for (const WorkItem* w : list) {
      if (w->tile_row != row || w->entry_begin != at || w->entry_end < w->entry_begin)
        violated("items", fmt::format("query tile ({}, {}, {}): entry ranges do not partition its row",
                                      std::get<0>(key), std::get<1>(key), std::get<2>(key)));
      if ((list.size() == 1) != (w->partial == -1)) violated("items", "partial must be -1 exactly for unsplit tiles");
      at = w->entry_end;
    }
    if (at != md.tile_row_offsets[row + 1]) violated("items", "partitions do not reach the row's end");
  }
  for (std::int32_t s = 0; s < md.n_partials; ++s) {
    if (!slot_used[s]) violated("items", fmt::format("partial slot {} unused", s));
  }
  if (md.merge_offsets.size() != md.merge_targets.size() + 1 || md.merge_offsets[0] != 0 ||
      md.merge_offsets.back() != md.n_partials)
    violated("merge_offsets", "size or end mismatch");
  for (std::size_t m = 0; m < md.merge_targets.size(); ++m) {
    const WorkItem& t = md.merge_targets[m];
    for (std::int32_t s = md.merge_offsets[m]; s < md.merge_offsets[m + 1]; ++s) {
      bool found = false;
      for (const WorkItem* w : by_tile[{t.batch, t.head, t.q_start}]) found = found || w->partial == s;
      if (!found) violated("merge_offsets", fmt::format("slot {} of merge {} belongs to another query tile", s, m));
    }
  }
}

}  // namespace tessera
