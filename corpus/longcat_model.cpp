// LongCat-Video BSA model: top-k kv blocks per query block on the synthetic score field.
#include <algorithm>

#include "tessera_corpus/score_field.hpp"
#include "tessera_corpus/selection.hpp"
#include "tessera_corpus/sparsifier.hpp"

namespace tessera::corpus {

void longcat_model(const CaseContext& c, double sparsity, PackedMask& m, HeadNotes& notes) {
  const std::int64_t n = c.kv->n_blocks;
  const std::int64_t k = std::clamp<std::int64_t>(std::int64_t((1.0 - sparsity) * double(n)), 1, n);
  topk_per_row_model(c, k, m, notes);
}

}  // namespace tessera::corpus
