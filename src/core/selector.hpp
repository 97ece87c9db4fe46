#pragma once
// Online plan selection (DESIGN.md section 6, online steps 1-2): request key + features -> regime -> the first
// eligible plan of its ranking; a miss falls back to the key's base plan; a key never profiled falls back to the
// documented default plan (docs/selection.md). Pure host logic: no GPU, no global state.
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/catalog_entry.hpp"
#include "core/eligibility.hpp"
#include "core/features.hpp"
#include "core/plan.hpp"
#include "core/plan_table.hpp"

namespace tessera {

/// Where a selected plan came from.
enum class SelectionSource : std::uint8_t {
  kTable,    ///< the first eligible plan of the regime's ranking
  kBase,     ///< the key's base plan (every ranked plan before it was ineligible)
  kDefault,  ///< the documented default plan: the key has no profiled tree (or no table is loaded)
};

/// "table", "base", "default".
const char* selection_source_name(SelectionSource s) noexcept;

/// The outcome of select().
struct Selection {
  Plan plan;
  std::string plan_id;
  SelectionSource source = SelectionSource::kDefault;
  std::string regime;  ///< "<key>/leaf<N>" for table and base selections, "<key>/default" otherwise
  int ranks_skipped = 0;  ///< ranked plans found ineligible before the chosen one
};

/// Which plans enumerate_plans() produces.
struct CandidateOptions {
  std::vector<int> splits{1};                         ///< split-KV partitions to try
  std::vector<Traversal> traversals{Traversal::kAscending};
  bool include_refined = true;
  bool include_coarsened = true;
  bool include_packed = true;
  /// Also each plan with persistent CTAs (`g1p`) on entries that run them (CatalogEntry::persistent_ctas), right
  /// after the same plan with one CTA per item.
  bool include_persistent = false;
};

/// The key of a request, as used by plan tables.
RequestKey request_key(const EligibilityRequest& request);

/// Every plan over `entries` (the kernels available) that is eligible for `request`, in a deterministic order:
/// mapping pairs (q: d, r<N> for every N leaving a tile of a multiple of 16 tokens, ascending, c2, c4, c8; kv: the
/// same, then p2, p4, p8), then entries in
/// catalog order, then splits, then traversals (then persistence, with options.include_persistent). Grouping is 1
/// (the kernels run one work item at a time).
std::vector<Plan> enumerate_plans(std::span<const CatalogEntry> entries, const EligibilityRequest& request,
                                  const CandidateOptions& options = {});

/// The documented default plan for `request` (docs/selection.md): among the eligible split-1 ascending plans,
/// the one whose mappings rank best in the order Direct < Refined < Coarsened span < packed (summed over the two
/// dimensions), ties broken by the larger physical tile, then catalog order. nullopt when nothing is eligible.
std::optional<Plan> default_plan(std::span<const CatalogEntry> entries, const EligibilityRequest& request);

/// The Direct plan (T = B on both dimensions, split 1, ascending) of the first eligible entry, if any.
std::optional<Plan> direct_plan(std::span<const CatalogEntry> entries, const EligibilityRequest& request);

/// Memo of select_plan()'s pure sub-results, kept by a caller that selects many times over the same `entries`
/// (the runtime keeps one): parsed plan ids and default plans per request key + eligibility inputs. Not
/// thread-safe.
struct SelectorCache {
  std::unordered_map<std::string, std::optional<Plan>> parsed;    ///< plan id -> plan (nullopt: unparsable)
  std::unordered_map<std::string, std::optional<Plan>> defaults;  ///< request fingerprint -> default plan
};

/// Parses every plan id of `table` into `cache` once (at load), so that no request pays for parsing a ranked plan
/// id on its first use of a regime. Ids this build cannot parse are memoized as unparsable (skipped, as
/// select_plan does).
void warm_selector_cache(const PlanTable& table, SelectorCache& cache);

/// Selects a plan. `table` may be null (no artifact loaded); `cache` may be null (no memo). Throws
/// Error(kUnsupported, "request") naming the key when no plan at all is eligible (no compiled kernel serves this
/// dtype / head_dim / geometry).
Selection select_plan(std::span<const CatalogEntry> entries, const PlanTable* table, const EligibilityRequest& request,
                      const FeatureVector& features, SelectorCache* cache = nullptr);

/// select_plan()'s answer for every regime of one request, computed before the request's features are known.
/// Eligibility depends on the request alone (EligibilityRequest), the features only choose the leaf, so once mu(M)
/// is known, select() is the tree walk and an index: no string is built, no map is searched, no id is parsed. The
/// runtime keeps one per request it has seen (Runtime::run works out the request's selections before it waits for
/// mu(M), whose host path after the wait runs with caches that other work on the host has emptied: bench/NOTES.md,
/// "Host dispatch, session 9").
struct RequestSelections {
  EligibilityRequest request;          ///< what the answers are for
  const PlanTable* table = nullptr;    ///< the table they came from (null: none loaded)
  const RegimeTree* tree = nullptr;    ///< request's key tree in `table`; null: key never profiled (default plan)
  /// Per leaf of `tree` (one entry, the default plan, when tree is null); nullopt: no plan at all is eligible there.
  std::vector<std::optional<Selection>> by_leaf;
  std::string error;                   ///< select_plan's message for the leaves without a plan
  std::string error_argument = "request";  ///< and the argument it names ("q" for a head_dim no kernel has)
  /// `tree` splits on coarsen_cost2/4/8, so mu(M) must count the coarsened pairs for these requests (Runtime::run
  /// skips the count, which holds the host's read of the statistics until pass 2 is done, where no node reads it).
  bool reads_coarsen_cost = false;
  /// select_plan(entries, table, request, features, cache) for the entries and cache this was built from; throws
  /// select_plan's Error(kUnsupported, error_argument, error) where select_plan does.
  const Selection& select(const FeatureVector& features) const;
};

/// Builds RequestSelections: select_plan's ranking walk for every leaf of the request's key tree. `table` must
/// outlive the result. Does not throw for a request no plan serves: select() does, for the leaves concerned.
RequestSelections select_for_every_regime(std::span<const CatalogEntry> entries, const PlanTable* table,
                                          const EligibilityRequest& request, SelectorCache* cache = nullptr);

}  // namespace tessera
