#include "core/features.hpp"

#include <algorithm>
#include <charconv>

#include "core/plan.hpp"
#include "tessera/error.hpp"

namespace tessera {

std::string RequestKey::str() const {
  return arch + "." + std::string(dtype_name(dtype)) + ".d" + std::to_string(head_dim) + ".q" +
         std::to_string(block_q) + ".kv" + std::to_string(block_kv);
}

std::optional<RequestKey> parse_request_key(std::string_view key) {
  std::string_view tok[5];
  std::string_view rest = key;
  for (int i = 0; i < 5; ++i) {
    const std::size_t dot = rest.find('.');
    if ((dot == std::string_view::npos) != (i == 4)) return std::nullopt;
    tok[i] = rest.substr(0, dot);
    rest = dot == std::string_view::npos ? std::string_view{} : rest.substr(dot + 1);
  }
  const std::optional<Arch> arch = arch_from_name(tok[0]);
  if (!arch) return std::nullopt;
  RequestKey k;
  k.arch = std::string(arch_name(*arch));
  if (tok[1] == dtype_name(DType::kBFloat16))
    k.dtype = DType::kBFloat16;
  else if (tok[1] == dtype_name(DType::kFloat16))
    k.dtype = DType::kFloat16;
  else
    return std::nullopt;
  auto number = [](std::string_view t, std::string_view prefix, int& out) {
    if (t.substr(0, prefix.size()) != prefix) return false;
    const char* first = t.data() + prefix.size();
    const char* last = t.data() + t.size();
    const auto [end, ec] = std::from_chars(first, last, out);
    return ec == std::errc() && end == last && out > 0;
  };
  if (!number(tok[2], "d", k.head_dim) || !number(tok[3], "q", k.block_q) || !number(tok[4], "kv", k.block_kv))
    return std::nullopt;
  if (k.str() != key) return std::nullopt;  // leading zeros
  return k;
}

RequestKey plan_request_key(const Plan& p) {
  return RequestKey{std::string(arch_name(p.arch)), p.dtype, p.head_dim, p.block_q, p.block_kv};
}

std::string_view feature_name(Feature f) noexcept {
  switch (f) {
    case Feature::kBatchHeads: return "batch_heads";
    case Feature::kSeqLen: return "seq_len";
    case Feature::kDensity: return "density";
    case Feature::kRunCoverage: return "run_coverage";
    case Feature::kMeanRunLength: return "mean_run_length";
    case Feature::kMeanRowActive: return "mean_row_active";
    case Feature::kRowImbalance: return "row_imbalance";
    case Feature::kGridRows: return "grid_rows";
    case Feature::kActiveBlocks: return "active_blocks";
    case Feature::kCoarsenCost2: return "coarsen_cost2";
    case Feature::kCoarsenCost4: return "coarsen_cost4";
    case Feature::kCoarsenCost8: return "coarsen_cost8";
    case Feature::kCount: break;
  }
  return "?";
}

Feature feature_from_name(std::string_view name) {
  for (int i = 0; i < kFeatureCount; ++i) {
    if (feature_name(static_cast<Feature>(i)) == name) return static_cast<Feature>(i);
  }
  throw Error(ErrorCode::kFormatError, "feature", "unknown feature name '" + std::string(name) + "'");
}

FeatureVector make_features(long long batch, long long heads_q, long long n_q, const MaskStats& stats) {
  FeatureVector v{};
  v[static_cast<int>(Feature::kBatchHeads)] = static_cast<double>(batch * heads_q);
  v[static_cast<int>(Feature::kSeqLen)] = static_cast<double>(n_q);
  v[static_cast<int>(Feature::kDensity)] = stats.density;
  v[static_cast<int>(Feature::kRunCoverage)] = stats.run_coverage;
  v[static_cast<int>(Feature::kMeanRunLength)] = stats.mean_run_length;
  v[static_cast<int>(Feature::kMeanRowActive)] = stats.mean_row_active;
  v[static_cast<int>(Feature::kRowImbalance)] = stats.row_imbalance;
  const double rows = static_cast<double>(batch * heads_q) * static_cast<double>(stats.shape.n_qb);
  v[static_cast<int>(Feature::kGridRows)] = rows;
  v[static_cast<int>(Feature::kActiveBlocks)] = rows * stats.mean_row_active;
  for (int i = 0; i < 3; ++i) v[static_cast<int>(Feature::kCoarsenCost2) + i] = stats.coarsen_cost[i];
  return v;
}

FeatureSchema FeatureSchema::default_schema() {
  FeatureSchema s;
  s.edges[static_cast<int>(Feature::kBatchHeads)] = {8, 16, 24, 32, 48, 64, 128, 256};
  s.edges[static_cast<int>(Feature::kSeqLen)] = {4096, 8192, 16384, 32768, 65536, 98304, 131072};
  s.edges[static_cast<int>(Feature::kDensity)] = {0.02, 0.04, 0.06, 0.08, 0.10, 0.12, 0.15, 0.2, 0.3, 0.5, 0.8};
  s.edges[static_cast<int>(Feature::kRunCoverage)] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9};
  s.edges[static_cast<int>(Feature::kMeanRunLength)] = {1.25, 1.5, 2, 3, 4, 6, 8, 16};
  s.edges[static_cast<int>(Feature::kMeanRowActive)] = {2, 4, 8, 16, 32, 64, 128, 256};
  s.edges[static_cast<int>(Feature::kRowImbalance)] = {1.01, 1.1, 1.5, 2, 4, 8, 16};
  // Multiples of the H200's 132 SMs (2 to 512 rows per SM), then of a million blocks (log-spaced).
  s.edges[static_cast<int>(Feature::kGridRows)] = {264, 528, 1056, 2112, 4224, 8448, 16896, 33792, 67584};
  s.edges[static_cast<int>(Feature::kActiveBlocks)] = {1e4, 3e4, 1e5, 3e5, 1e6, 3e6, 1e7, 3e7};
  // Per doubling of the query blocks per CTA: 1 = the rows share every block, 2 = they share none.
  for (int i = 0; i < 3; ++i)
    s.edges[static_cast<int>(Feature::kCoarsenCost2) + i] = {1.02, 1.05, 1.1, 1.15, 1.2, 1.25, 1.3, 1.35, 1.4, 1.5, 1.6, 1.8};
  return s;
}

int FeatureSchema::bucket(Feature f, double value) const {
  const auto& e = edges[static_cast<int>(f)];
  return static_cast<int>(std::upper_bound(e.begin(), e.end(), value) - e.begin());
}

BucketVector bucketize(const FeatureSchema& schema, const FeatureVector& values) {
  BucketVector b{};
  for (int i = 0; i < kFeatureCount; ++i) b[i] = schema.bucket(static_cast<Feature>(i), values[i]);
  return b;
}

}  // namespace tessera
