#include "tessera_corpus/svg.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "tessera/error.hpp"
#include "tessera_corpus/score_field.hpp"

namespace tessera::corpus {

std::int64_t svg_band_tokens(std::int64_t n, std::int64_t frame, double d, std::int64_t text, bool strict) {
  const double dp = d - 2.0 * double(text) / double(n);
  if (!(dp > 0 && dp <= 1)) throw Error(ErrorCode::kInvalidArgument, "density", fmt::format("effective density {} not in (0, 1]", dp));
  const double wf = double(n) * (1.0 - std::sqrt(1.0 - dp)) / double(frame);
  const double tokens = wf * double(frame) / 128.0;
  return std::int64_t(strict ? std::floor(tokens) : std::ceil(tokens)) * 128;
}

void svg_fill_head(PackedMask& m, std::int64_t head, std::int64_t n_q, std::int64_t n_kv, int bq, int bkv,
                   std::int64_t band, bool strict, std::int64_t sink) {
  for (std::int64_t i = 0; i < m.n_qb; ++i) {
    const std::int64_t q0 = i * bq, q1 = std::min(n_q, q0 + bq) - 1;  // inclusive token range
    // kv blocks whose tokens reach within the band: k in [q0 - band, q1 + band] (strict: band - 1).
    const std::int64_t reach = strict ? band - 1 : band;
    if (reach >= 0) {
      const std::int64_t lo = std::max<std::int64_t>(0, q0 - reach), hi = std::min(n_kv - 1, q1 + reach);
      if (lo <= hi) m.set_range(head, i, lo / bkv, hi / bkv + 1);
    }
    if (sink > 0) m.set_range(head, i, 0, (std::min(sink, n_kv) + bkv - 1) / bkv);
  }
}

void svg_model(const CaseContext& c, double density, PackedMask& m, HeadNotes& notes) {
  const LatentGrid& g = c.q->grid;
  const std::int64_t n = c.q->seq_len, frame = std::int64_t(g.h) * g.w;
  // `density` is the case's total target: the band gets what the first-frame sink leaves.
  const double sink_share = double(frame) / double(n);
  const std::int64_t band = svg_band_tokens(n, frame, std::max(0.01, density - sink_share), 0, false);
  for (std::size_t h = 0; h < c.head_ids.size(); ++h) {
    svg_fill_head(m, std::int64_t(h), n, c.kv->seq_len, c.q->block, c.kv->block, band, false, frame);
    const FieldKey key{c.request_seed, c.layer, c.layers, c.step, c.steps, c.head_ids[h]};
    const bool temporal = field_head_type(key) == HeadType::kTemporalWide;
    notes.push_back(fmt::format("layout={} band={} sink={}", temporal ? "temporal(token-major)" : "spatial(frame-major)", band, frame));
  }
}

}  // namespace tessera::corpus
