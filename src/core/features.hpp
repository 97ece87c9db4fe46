#pragma once
// Request features for profile-guided selection (DESIGN.md section 6): the request key k(R), which forms the
// coarse groups of the plan table, and the bucketed features u(R) (request dimensions) and s(M) (mask
// statistics) that the decision tree inside a group splits on.
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/dtype.hpp"
#include "tessera/mask_state.hpp"

namespace tessera {

/// k(R) = (arch, B_Q, B_KV, dtype, head_dim). Printed as "<arch>.<dtype>.d<D>.q<B_Q>.kv<B_KV>",
/// e.g. "sm90a.bf16.d128.q64.kv64".
struct RequestKey {
  std::string arch;  ///< "sm80", "sm86", "sm89", "sm90a", "sm120"
  DType dtype = DType::kBFloat16;
  int head_dim = 128;
  int block_q = 64;
  int block_kv = 64;

  std::string str() const;
  bool operator==(const RequestKey&) const = default;
};

/// Parses the canonical spelling RequestKey::str() writes, "<arch>.<dtype>.d<D>.q<B_Q>.kv<B_KV>": a known
/// architecture (sm80, sm86, sm89, sm90a, sm120), dtype bf16 or f16, and positive decimal integers without sign or
/// leading zeros. Returns nullopt for anything else (e.g. "garbage", "sm99.bf16.d128.q64.kv64", "...d0128...").
std::optional<RequestKey> parse_request_key(std::string_view key);

struct Plan;
/// The request key a plan serves: its arch, dtype, head_dim, B_Q and B_KV.
RequestKey plan_request_key(const Plan& plan);

/// The features a plan-table tree may split on, in schema order.
enum class Feature : int {
  kBatchHeads = 0,   ///< B * H_q (query heads), count
  kSeqLen,           ///< N_q, tokens
  kDensity,          ///< active blocks / all blocks, [0, 1]
  kRunCoverage,      ///< fraction of active blocks in runs of length >= 2, [0, 1]
  kMeanRunLength,    ///< active blocks / runs, blocks
  kMeanRowActive,    ///< mean active kv blocks per mask row, blocks
  kRowImbalance,     ///< max active kv blocks of one mask row / mean_row_active, >= 1 (0 for an empty mask)
  kGridRows,         ///< B * H_q * n_qb: query-block rows over all query heads (the size of a Direct grid), count
  kActiveBlocks,     ///< B * H_q * n_qb * mean_row_active: active (head, q block, kv block) triples, count
  kCoarsenCost2,     ///< MaskStats::coarsen_cost[0]: computed pairs of 2 query blocks per CTA / active blocks, [1, 2]
  kCoarsenCost4,     ///< MaskStats::coarsen_cost[1]: pairs with 4 query blocks per CTA / pairs with 2, [1, 2]
  kCoarsenCost8,     ///< MaskStats::coarsen_cost[2]: pairs with 8 query blocks per CTA / pairs with 4, [1, 2]
  kCount
};
inline constexpr int kFeatureCount = static_cast<int>(Feature::kCount);

/// Stable feature names used in the artifact: "batch_heads", "seq_len", "density", "run_coverage",
/// "mean_run_length", "mean_row_active", "row_imbalance", "grid_rows", "active_blocks", "coarsen_cost2",
/// "coarsen_cost4", "coarsen_cost8".
std::string_view feature_name(Feature f) noexcept;
/// Inverse of feature_name(); throws Error(kFormatError, "feature", ...) for an unknown name.
Feature feature_from_name(std::string_view name);

/// Raw feature values of one request, indexed by Feature.
using FeatureVector = std::array<double, kFeatureCount>;

/// Collects u(R) and s(M) for a request of `batch` x `heads_q` query heads and `n_q` query tokens. The request-size
/// features count every query head, also where the mask is shared by heads (stats.shape.heads < heads_q): the work
/// is per query head. n_qb is stats.shape.n_qb.
FeatureVector make_features(long long batch, long long heads_q, long long n_q, const MaskStats& stats);

/// Bucket edges per feature: bucket(v) = number of edges <= v (so k edges give k + 1 buckets).
struct FeatureSchema {
  std::array<std::vector<double>, kFeatureCount> edges;

  /// The default schema (edges documented in docs/selection.md).
  static FeatureSchema default_schema();
  int bucket(Feature f, double value) const;
  bool operator==(const FeatureSchema&) const = default;
};

/// Bucketed features.
using BucketVector = std::array<int, kFeatureCount>;
BucketVector bucketize(const FeatureSchema& schema, const FeatureVector& values);

}  // namespace tessera
