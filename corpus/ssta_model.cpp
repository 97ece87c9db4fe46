// HunyuanVideo-1.5 SSTA model: STA (3,3,3) window union top-k tiles on the synthetic score field.
#include <fmt/core.h>

#include "tessera/error.hpp"
#include "tessera_corpus/score_field.hpp"
#include "tessera_corpus/selection.hpp"
#include "tessera_corpus/sparsifier.hpp"
#include "tessera_corpus/sta.hpp"

namespace tessera::corpus {

void ssta_model(const CaseContext& c, int topk, PackedMask& m, HeadNotes& notes) {
  const BlockLayout& L = *c.q;
  if (!L.order.tiled || L.order.tile_volume() != L.block || c.kv->block != L.block)
    throw Error(ErrorCode::kInvalidArgument, "order", "SSTA needs square blocks equal to one tile");
  const LatentGrid tiles = tile_grid(L.grid, L.order);
  const StaWindow win{std::min(3, tiles.t), std::min(3, tiles.h), std::min(3, tiles.w)};
  const std::int64_t n = L.n_blocks;
  std::vector<float> s;
  std::vector<std::int32_t> scratch;
  for (std::size_t h = 0; h < c.head_ids.size(); ++h) {
    sta_fill_head(m, std::int64_t(h), tiles, win);
    const FieldKey key{c.request_seed, c.layer, c.layers, c.step, c.steps, c.head_ids[h]};
    score_field(L, *c.kv, key, s);
    for (std::int64_t i = 0; i < n; ++i) select_topk(&s[std::size_t(i * n)], topk, m, std::int64_t(h), i, scratch);
    notes.push_back(fmt::format("{} window=({},{},{}) topk={}", head_type_name(field_head_type(key)), win.t, win.h, win.w, topk));
  }
}

}  // namespace tessera::corpus
