#pragma once
/// @file selection.hpp
/// Per-row block selection rules shared by the sparsifier models: top-k and cumulative-mass (cdf / top-p)
/// selection over a score row, and calibration of a softmax sharpness to a target density.
#include <cstdint>
#include <vector>

#include "tessera_corpus/packed_mask.hpp"

namespace tessera::corpus {

/// Sets, in row (head, q) of m, the k kv blocks with the highest scores (ties: lower index first).
/// `scores` points at n_kvb floats; `scratch` is reused between calls. k is clamped to [0, n_kvb].
void select_topk(const float* scores, std::int64_t k, PackedMask& m, std::int64_t head, std::int64_t q,
                 std::vector<std::int32_t>& scratch);

/// Number of kv blocks the cdf rule keeps in one row: p = softmax(beta * scores); sort descending; the smallest
/// prefix whose mass reaches `threshold` (at least min_keep). If `sel` is not null the selected indices are
/// written there. `scratch` is reused.
std::int64_t select_cdf(const float* scores, std::int64_t n, double beta, double threshold, std::int64_t min_keep,
                        std::vector<std::int32_t>* sel, std::vector<std::int32_t>& scratch);

/// Finds beta in [1e-3, 1e3] (bisection in log space, 30 steps) such that the cdf rule on every `stride`-th row
/// of scores [n_q, n_kv] keeps `target` of the blocks on average. Deterministic.
double calibrate_cdf_beta(const std::vector<float>& scores, std::int64_t n_q, std::int64_t n_kv, double threshold,
                          double target, std::int64_t stride);

}  // namespace tessera::corpus
