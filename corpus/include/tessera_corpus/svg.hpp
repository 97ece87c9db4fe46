#pragma once
/// @file svg.hpp
/// Sparse VideoGen (SVG v1) banded block mask, rule-exact (mask_corpus.md 2.3). In the kernel's coordinates
/// every head is the same diagonal band (+ first-frame sink for Wan); "temporal" heads differ only in that
/// Q/K/V were re-ordered token-major before the kernel, which the metadata records per head.
#include <cstdint>

#include "tessera_corpus/packed_mask.hpp"
#include "tessera_corpus/sparsifier.hpp"

namespace tessera::corpus {

/// Band half-width in tokens for density target d over N video tokens with `frame` tokens per frame:
/// w_f = N (1 - sqrt(1 - d')) / frame, d' = d - 2 text / N; Wan: ceil(w_f * frame / 128) * 128,
/// HunyuanVideo (strict = true): floor(w_f * frame / 128) * 128 (then used with a strict comparison).
/// Throws tessera::Error(kInvalidArgument, "density") unless 0 < d' <= 1.
std::int64_t svg_band_tokens(std::int64_t n, std::int64_t frame, double d, std::int64_t text, bool strict);

/// Fills head `head` of m: block (i, j) is active iff some query token q of block i and kv token k of block j
/// (blocks of block_q / block_kv tokens over n_q / n_kv tokens, last block ragged) satisfy |q - k| <= band
/// (|q - k| < band when strict), or k < sink_tokens.
void svg_fill_head(PackedMask& m, std::int64_t head, std::int64_t n_q, std::int64_t n_kv, int block_q, int block_kv,
                   std::int64_t band, bool strict, std::int64_t sink_tokens);

/// SVG case on a raster layout: band from density d - frame / N (the first-frame sink takes frame / N of the
/// target `density`), Wan-style (non-strict, first-frame sink); per-head layout
/// spatial/temporal from the score field's head type (temporal-wide heads take the token-major layout).
void svg_model(const CaseContext& c, double density, PackedMask& m, HeadNotes& notes);

}  // namespace tessera::corpus
