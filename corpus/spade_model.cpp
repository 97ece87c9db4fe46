// SPADE-style model: sink + diagonal band + top-k on the synthetic score field.
#include <fmt/core.h>

#include <algorithm>

#include "tessera_corpus/score_field.hpp"
#include "tessera_corpus/selection.hpp"
#include "tessera_corpus/sparsifier.hpp"

namespace tessera::corpus {

void spade_model(const CaseContext& c, double topk_frac, int sink, int diag, PackedMask& m, HeadNotes& notes) {
  const std::int64_t nq = c.q->n_blocks, nk = c.kv->n_blocks;
  const std::int64_t k = std::clamp<std::int64_t>(std::int64_t(topk_frac * double(nk)), 1, nk);
  std::vector<float> s;
  std::vector<std::int32_t> scratch;
  for (std::size_t h = 0; h < c.head_ids.size(); ++h) {
    const FieldKey key{c.request_seed, c.layer, c.layers, c.step, c.steps, c.head_ids[h]};
    score_field(*c.q, *c.kv, key, s);
    for (std::int64_t i = 0; i < nq; ++i) {
      m.set_range(std::int64_t(h), i, 0, sink);
      const std::int64_t centre = i * c.q->block / c.kv->block;  // kv block holding the query block's first token
      m.set_range(std::int64_t(h), i, centre - diag, centre + diag + 1);
      select_topk(&s[std::size_t(i * nk)], k, m, std::int64_t(h), i, scratch);
    }
    notes.push_back(fmt::format("{} sink={} diag={} k={}", head_type_name(field_head_type(key)), sink, diag, k));
  }
}

}  // namespace tessera::corpus
