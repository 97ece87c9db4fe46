// VSA model: top-k cubes per query cube on the synthetic score field.
#include <algorithm>
#include <cmath>

#include "tessera_corpus/score_field.hpp"
#include "tessera_corpus/selection.hpp"
#include "tessera_corpus/sparsifier.hpp"

namespace tessera::corpus {

void topk_per_row_model(const CaseContext& c, std::int64_t k, PackedMask& m, HeadNotes& notes) {
  const std::int64_t n = c.kv->n_blocks;
  std::vector<float> s;
  std::vector<std::int32_t> scratch;
  for (std::size_t h = 0; h < c.head_ids.size(); ++h) {
    const FieldKey key{c.request_seed, c.layer, c.layers, c.step, c.steps, c.head_ids[h]};
    score_field(*c.q, *c.kv, key, s);
    for (std::int64_t i = 0; i < c.q->n_blocks; ++i) select_topk(&s[std::size_t(i * n)], k, m, std::int64_t(h), i, scratch);
    notes.push_back(std::string(head_type_name(field_head_type(key))) + " k=" + std::to_string(k));
  }
}

void vsa_model(const CaseContext& c, double sparsity, PackedMask& m, HeadNotes& notes) {
  const std::int64_t n = c.kv->n_blocks;
  const std::int64_t k = std::clamp<std::int64_t>(std::int64_t(std::ceil((1.0 - sparsity) * double(n) - 1e-9)), 1, n);
  topk_per_row_model(c, k, m, notes);
}

}  // namespace tessera::corpus
