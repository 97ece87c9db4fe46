#pragma once
/// @file score_field.hpp
/// The synthetic block-level log-score field of mask_corpus.md section 5.3, a stand-in for the pooled q.k
/// scores that content-dependent sparsifiers rank. It is a MODEL, not data from a real network:
///   S(i, j) = gamma_step * [ locality(i, j) + alpha * (A f_i) . (B f_j) / sqrt(r) + sink(j) + noise(i, j) ]
/// - locality: -1/2 sum over (t, h, w) of (delta / sigma)^2 on block centres (latent token units), with a head
///   type drawn from the real STA head mix (section 4.1): temporal-wide 40 %, spatial full-frame 32 %, 3-D local
///   15 %, row 10 %, column 3 %; the last 10 % of layers are ~85 % spatial full-frame;
/// - semantic: r = 8 Gaussian "objects" per (request, layer) whose centres drift smoothly with the step,
///   mixed per head by random r x r matrices A, B (scattered far blocks that top-k and cdf rules pick);
/// - sink: in ~20 % of heads, kv blocks of the first latent frame get a positive offset;
/// - noise: a fixed per-(request, layer, head) hash term of amplitude 0.3 (stable over steps);
/// - gamma_step = 0.6 + 0.8 * step / steps: flatter early, sharper late (matters for mass-based rules).
#include <cstdint>
#include <string>
#include <vector>

#include "tessera_corpus/geometry.hpp"

namespace tessera::corpus {

/// Which request / layer / step / head a field is drawn for.
struct FieldKey {
  std::uint64_t request_seed = 0;  ///< one synthetic request (prompt): a chunk of the corpus
  int layer = 0, layers = 1;
  int step = 0, steps = 50;
  int head = 0;
};

/// Head types of the locality kernel.
enum class HeadType : std::uint8_t { kTemporalWide, kSpatialFrame, kLocal3d, kRow, kColumn };
const char* head_type_name(HeadType t) noexcept;

/// The head type the field uses for a key (depends on request, layer and head, not on the step).
HeadType field_head_type(const FieldKey& key);

/// Fills out[i * kv.n_blocks + j] (float, [q.n_blocks, kv.n_blocks]) with S(i, j). q and kv must share the grid.
void score_field(const BlockLayout& q, const BlockLayout& kv, const FieldKey& key, std::vector<float>& out);

}  // namespace tessera::corpus
