// SpargeAttn model: cumulative-mass (cdf) selection with per-head thresholds, forced dense rows/columns.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "tessera_corpus/rng.hpp"
#include "tessera_corpus/score_field.hpp"
#include "tessera_corpus/selection.hpp"
#include "tessera_corpus/sparsifier.hpp"

namespace tessera::corpus {

void sparge_model(const CaseContext& c, double mean_density, PackedMask& m, HeadNotes& notes) {
  const std::int64_t nq = c.q->n_blocks, nk = c.kv->n_blocks;
  constexpr double kSigma = 0.25;
  std::vector<float> s;
  std::vector<std::int32_t> scratch, sel;
  for (std::size_t h = 0; h < c.head_ids.size(); ++h) {
    const FieldKey key{c.request_seed, c.layer, c.layers, c.step, c.steps, c.head_ids[h]};
    // Per-head tuned hyper-parameters (fixed over steps, like SpargeAttn's offline tuning).
    Rng r(hash_combine(hash_combine(hash_combine(c.request_seed, 0x535041524745), std::uint64_t(c.layer)),
                       std::uint64_t(c.head_ids[h])));
    const double threshold = r.uniform(0.95, 0.995);
    const double target = std::clamp(mean_density * std::exp(kSigma * r.normal() - 0.5 * kSigma * kSigma), 0.01, 0.6);
    score_field(*c.q, *c.kv, key, s);
    const std::int64_t stride = std::max<std::int64_t>(1, nq / 96);
    const double beta = calibrate_cdf_beta(s, nq, nk, threshold, target, stride);
    for (std::int64_t i = 0; i < nq; ++i) {
      select_cdf(&s[std::size_t(i * nk)], nk, beta, threshold, 1, &sel, scratch);
      for (auto j : sel) m.set(std::int64_t(h), i, j);
    }
    // Non-self-similar blocks: their query rows are dense, their kv columns are forced on.
    Rng rb(hash_combine(hash_combine(c.request_seed, 0x53494D), std::uint64_t(c.layer) * 1000 + std::uint64_t(c.head_ids[h])));
    int forced = 0;
    for (std::int64_t i = 0; i < nq; ++i)
      if (rb.uniform() < 0.003) {
        m.set_row(std::int64_t(h), i);
        ++forced;
      }
    for (std::int64_t j = 0; j < nk; ++j)
      if (rb.uniform() < 0.003) {
        for (std::int64_t i = 0; i < nq; ++i) m.set(std::int64_t(h), i, j);
        ++forced;
      }
    notes.push_back(fmt::format("{} cdf={:.3f} target={:.3f} beta={:.3g} forced={}", head_type_name(field_head_type(key)),
                                threshold, target, beta, forced));
  }
}

}  // namespace tessera::corpus
