#pragma once
/// @file sparsifier.hpp
/// Common inputs of the sparsifier generators. Each generator fills the heads of one case (one layer, one
/// denoising step, one request) in its own token order and block geometry. Rule-exact generators (STA, SVG
/// bands, Radial) need no scores; MODELS of content-dependent methods (VSA, SpargeAttn, SSTA top-k, SPADE,
/// LongCat) apply the method's own selection rule to the synthetic score field (score_field.hpp).
#include <cstdint>
#include <string>
#include <vector>

#include "tessera_corpus/geometry.hpp"
#include "tessera_corpus/packed_mask.hpp"

namespace tessera::corpus {

/// One case to fill.
struct CaseContext {
  const BlockLayout* q = nullptr;   ///< query blocks
  const BlockLayout* kv = nullptr;  ///< kv blocks (same token order and grid as q)
  int layer = 0, layers = 1;
  int step = 0, steps = 50;
  std::uint64_t request_seed = 0;   ///< the synthetic request (chunk) this case belongs to
  std::vector<int> head_ids;        ///< model heads in this case, one per mask head
};

/// Per-head notes the generators return (head type, layout, calibrated parameters), stored in the metadata.
using HeadNotes = std::vector<std::string>;

/// VSA model (FastVideo): top-k kv blocks per query block by the score field, k = ceil((1 - sparsity) * n_kvb)
/// clamped to [1, n_kvb]: every row has exactly k blocks. mask_corpus.md 2.2.
/// The shared rule of the top-k models (VSA, LongCat): for every head, the k highest-scoring kv blocks of each
/// query block of the synthetic score field are active; notes record the head type and k.
void topk_per_row_model(const CaseContext& c, std::int64_t k, PackedMask& m, HeadNotes& notes);

void vsa_model(const CaseContext& c, double sparsity, PackedMask& m, HeadNotes& notes);

/// LongCat-Video BSA model: top-k per query block with k = max(1, int((1 - sparsity) * n_kvb)). mask_corpus.md 2.8.
void longcat_model(const CaseContext& c, double sparsity, PackedMask& m, HeadNotes& notes);

/// SpargeAttn model: per head a cdf threshold in [0.95, 0.995] (the tuned CogVideoX range, section 3.3) and a
/// head density target = mean_density * lognormal(0, 0.25) / E[.]; the softmax sharpness of the field is
/// calibrated to that target; rows keep the smallest prefix of kv blocks by probability that reaches the
/// threshold (>= 1); "non-self-similar" blocks (0.3 % of blocks per head) force their query row dense and their
/// kv column on. mask_corpus.md 2.6.
void sparge_model(const CaseContext& c, double mean_density, PackedMask& m, HeadNotes& notes);

/// HunyuanVideo-1.5 SSTA model: STA window (3,3,3) in tile coordinates (clamped rule of sta.hpp) united with the
/// top-k video tiles by the field. Blocks must be whole tiles (block == tile volume). mask_corpus.md 2.7.
void ssta_model(const CaseContext& c, int topk, PackedMask& m, HeadNotes& notes);

/// SPADE-style model: sink (first `sink` kv blocks), diagonal band (+-`diag` blocks around the query block's
/// position) and the top-k kv blocks by the field, k = int(topk_frac * n_kvb). mask_corpus.md 2.9.
void spade_model(const CaseContext& c, double topk_frac, int sink, int diag, PackedMask& m, HeadNotes& notes);

}  // namespace tessera::corpus
