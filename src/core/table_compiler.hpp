#pragma once
// Offline plan-table compilation (DESIGN.md section 6, step 2): from profile records (one per case x plan),
// grow one decision tree per request key over bucketed features, depth chosen by cross-validation over folds
// that keep each request's masks together (all steps, layers and heads of one request of one source),
// >= min_leaf_cases cases per leaf; rank plans per leaf by geometric-mean latency; and report the regret on the
// evaluation split.
#include <map>
#include <string>
#include <vector>

#include "core/features.hpp"
#include "core/plan_table.hpp"

namespace tessera {

/// One profiled (case, plan) pair, as written by `tessera profile` (one JSON object per line).
struct ProfileRecord {
  std::string case_id;   ///< unique per mask + request parameters
  std::string source;    ///< mask source (sparsifier x model, e.g. "q64-vsa-wan720")
  /// The request the mask belongs to (e.g. "q64-vsa-wan720#3": source and corpus chunk); cross-validation
  /// folds never split a request. Optional in JSON: empty (older records) means the source is the request.
  std::string request;
  std::string split;     ///< "profile" or "eval"
  std::string key;       ///< RequestKey::str()
  FeatureVector features{};
  std::string plan;      ///< plan id
  double latency_us = 0; ///< median kernel latency, microseconds
  bool valid = false;    ///< output matched the reference
  std::string role;      ///< optional: "direct" (T = B plan), "default" (the key's documented default plan) or ""
};

/// Which features a record's JSON carried, indexed by Feature.
using FeaturePresence = std::array<bool, kFeatureCount>;

/// Parses one JSON line of a profile file; throws Error(kFormatError, "profile", ...) naming the field (features and
/// latency_us must be finite JSON numbers: a boolean is not read as 0 or 1). With
/// `present` null, every feature of the current schema must be given. With `present` given (records written
/// under an older schema, for `tessera profile-refeature`), missing features are allowed, left 0 and marked
/// false in *present.
ProfileRecord profile_record_from_json(const std::string& line, FeaturePresence* present = nullptr);
/// Serializes one record to a single JSON line (no trailing newline).
std::string profile_record_to_json(const ProfileRecord& r);

/// Options of compile_plan_table().
struct CompileOptions {
  int min_leaf_cases = 32;  ///< DESIGN.md: at least 32 cases per leaf
  int max_depth = 6;        ///< largest depth tried by cross-validation
  int folds = 5;            ///< at most this many folds (fewer when there are fewer requests)
  /// Base plan per key (eligible for every request of the key). Keys missing here use the plan measured
  /// valid on the most cases, ties broken by the lower geometric-mean latency.
  std::map<std::string, std::string> base_plans;
};

/// Depth chosen and cross-validated mean log-regret per depth, for one key.
struct KeyReport {
  std::string key;
  int cases = 0;
  int chosen_depth = 0;
  std::vector<double> cv_log_regret;  ///< index = depth
  int leaves = 0;
};

/// Compiles the profiling-split records into a plan table (the evaluation split is ignored here).
PlanTable compile_plan_table(const std::vector<ProfileRecord>& records, const CompileOptions& options,
                             std::vector<KeyReport>* reports = nullptr);

/// Regret of a table on a set of records (normally the evaluation split): per case, the plan selected is the
/// first of its regime's ranking that was measured valid for that case (the eligibility stand-in), regret =
/// latency(selected) / latency(fastest valid plan). Speedup over Direct = latency(direct) / latency(selected).
/// One evaluation case's outcome (latencies in microseconds, median of the profiled repetitions).
struct CaseRegret {
  std::string case_id;
  std::string key;
  std::string source;
  std::string selected_plan;  ///< first plan of the regime's ranking measured valid for the case
  double selected_us = 0;
  std::string best_plan;      ///< fastest plan measured valid for the case
  double best_us = 0;
  double regret = 1;          ///< selected_us / best_us (>= 1)
};

struct RegretReport {
  int cases = 0;
  int cases_missing_key = 0;     ///< cases whose key has no tree (not counted in the figures)
  double geomean_regret = 1;
  double p95_regret = 1;
  double p99_regret = 1;
  double max_regret = 1;
  double geomean_speedup_over_direct = 1;  ///< over cases where the Direct plan was measured valid
  int direct_cases = 0;
  std::vector<CaseRegret> per_case;  ///< one entry per scored case, in key then case-id order
};

/// `direct_plans`: key -> id of the Direct plan (T = B) of that key.
RegretReport evaluate_plan_table(const PlanTable& table, const std::vector<ProfileRecord>& records,
                                 const std::map<std::string, std::string>& direct_plans);

}  // namespace tessera
