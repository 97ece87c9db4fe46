#include "core/selector.hpp"

#include <algorithm>

#include "core/catalog.hpp"
#include "tessera/error.hpp"

namespace tessera {

namespace {

constexpr int kFactors[] = {2, 4, 8};

/// Direct, then Refined by every factor r that leaves a tile of a multiple of 16 tokens (ascending r), then
/// Coarsened by 2, 4, 8, for a dimension of logical block `block`.
std::vector<DimMapping> q_mappings(const CandidateOptions& o, int block) {
  std::vector<DimMapping> m{{MappingKind::kDirect, 1}};
  if (o.include_refined)
    for (int r = 2; r <= kMaxRefineFactor && block / r >= 16; ++r)
      if (block % r == 0 && (block / r) % 16 == 0) m.push_back({MappingKind::kRefine, r});
  if (o.include_coarsened)
    for (int f : kFactors) m.push_back({MappingKind::kCoarsen, f});
  return m;
}

std::vector<DimMapping> kv_mappings(const CandidateOptions& o, int block) {
  std::vector<DimMapping> m = q_mappings(o, block);
  if (o.include_packed)
    for (int f : kFactors) m.push_back({MappingKind::kPacked, f});
  return m;
}

int mapping_rank(const DimMapping& m) {
  switch (m.kind) {
    case MappingKind::kDirect: return 0;
    case MappingKind::kRefine: return 1;
    case MappingKind::kCoarsen: return 2;
    case MappingKind::kPacked: return 3;
  }
  return 4;
}

Plan make_plan(const CatalogEntry& e, const EligibilityRequest& r, DimMapping q, DimMapping kv, int split,
               Traversal t) {
  Plan p;
  p.arch = r.arch;
  p.family = e.family;
  p.dtype = e.dtype;
  p.head_dim = e.head_dim;
  p.block_q = r.block_q;
  p.block_kv = r.block_kv;
  p.q = q;
  p.kv = kv;
  p.org.split = split;
  p.org.traversal = t;
  p.org.stages = e.stages;
  p.warps = e.warps;
  return p;
}

}  // namespace

const char* selection_source_name(SelectionSource s) noexcept {
  switch (s) {
    case SelectionSource::kTable: return "table";
    case SelectionSource::kBase: return "base";
    case SelectionSource::kDefault: return "default";
  }
  return "?";
}

RequestKey request_key(const EligibilityRequest& r) {
  RequestKey k;
  k.arch = std::string(arch_name(r.arch));
  k.dtype = r.dtype;
  k.head_dim = r.head_dim;
  k.block_q = r.block_q;
  k.block_kv = r.block_kv;
  return k;
}

std::vector<Plan> enumerate_plans(std::span<const CatalogEntry> entries, const EligibilityRequest& request,
                                  const CandidateOptions& options) {
  std::vector<Plan> out;
  for (const DimMapping& q : q_mappings(options, request.block_q)) {
    for (const DimMapping& kv : kv_mappings(options, request.block_kv)) {
      const int tq = q.tile(request.block_q), tkv = kv.tile(request.block_kv);
      for (const CatalogEntry& e : entries) {
        if (e.tile_q != tq || e.tile_kv != tkv || e.dtype != request.dtype || e.head_dim != request.head_dim) continue;
        for (int split : options.splits) {
          for (Traversal t : options.traversals) {
            Plan p = make_plan(e, request, q, kv, split, t);
            if (!eligible(p, e, request)) continue;
            out.push_back(p);
            if (options.include_persistent && e.persistent_ctas) {
              p.org.persistent = true;
              out.push_back(p);
            }
          }
        }
      }
    }
  }
  return out;
}

std::optional<Plan> default_plan(std::span<const CatalogEntry> entries, const EligibilityRequest& request) {
  const std::vector<Plan> all = enumerate_plans(entries, request);
  const Plan* best = nullptr;
  auto score = [](const Plan& p) {
    return std::make_pair(mapping_rank(p.q) + mapping_rank(p.kv), -(p.tile_q() * p.tile_kv()));
  };
  for (const Plan& p : all)
    if (!best || score(p) < score(*best)) best = &p;  // strict: keeps the first in enumeration order on ties
  if (!best) return std::nullopt;
  return *best;
}

std::optional<Plan> direct_plan(std::span<const CatalogEntry> entries, const EligibilityRequest& request) {
  CandidateOptions o;
  o.include_refined = o.include_coarsened = o.include_packed = false;
  const std::vector<Plan> all = enumerate_plans(entries, request, o);
  if (all.empty()) return std::nullopt;
  return all.front();
}

namespace {

// Memoized parse of a ranked plan id (nullopt: unparsable).
std::optional<Plan> parse_ranked(const std::string& id, SelectorCache* cache) {
  if (cache) {
    auto it = cache->parsed.find(id);
    if (it != cache->parsed.end()) return it->second;
  }
  std::optional<Plan> p;
  try {
    p = parse_plan_id(id);
  } catch (const Error&) {
    // skipped: a loaded table cannot rank one (plan_table_from_json rejects it), a PlanTable built in code may
  }
  if (cache) cache->parsed.emplace(id, p);
  return p;
}

}  // namespace

void warm_selector_cache(const PlanTable& table, SelectorCache& cache) {
  for (const auto& [key, tree] : table.trees) {
    parse_ranked(tree.base_plan, &cache);
    for (const auto& ranking : tree.rankings)
      for (const std::string& id : ranking) parse_ranked(id, &cache);
  }
}

namespace {

/// The first eligible plan of `tree`'s ranking for `leaf` (source kTable, or kBase for the base plan); nullopt when
/// none is eligible, with `skipped` = the ranking's length.
std::optional<Selection> ranked_selection(std::span<const CatalogEntry> entries, const RegimeTree& tree, int leaf,
                                          const std::string& key, const EligibilityRequest& request,
                                          SelectorCache* cache, int& skipped) {
  skipped = 0;
  for (const std::string& id : tree.rankings[leaf]) {
    const std::optional<Plan> parsed = parse_ranked(id, cache);
    const CatalogEntry* e = parsed ? find_plan_entry(*parsed, entries) : nullptr;
    if (e && eligible(*parsed, *e, request)) {
      Selection sel;
      sel.plan = *parsed;
      sel.plan_id = id;
      sel.source = id == tree.base_plan ? SelectionSource::kBase : SelectionSource::kTable;
      sel.regime = key + "/leaf" + std::to_string(leaf);
      sel.ranks_skipped = skipped;
      return sel;
    }
    skipped += 1;
  }
  return std::nullopt;
}

/// The documented default plan (memoized in `cache` per request fingerprint), with `regime` and `skipped` as given.
Selection default_selection(std::span<const CatalogEntry> entries, const std::string& key,
                            const EligibilityRequest& request, SelectorCache* cache, std::string regime, int skipped) {
  std::optional<Plan> d;
  const std::string fingerprint = key + "/" + std::to_string(static_cast<int>(request.mask_format)) + "/" +
                                  std::to_string(request.query_tiles) + "/" + std::to_string(request.max_workspace_bytes);
  bool memoized = false;
  if (cache) {
    if (auto it = cache->defaults.find(fingerprint); it != cache->defaults.end()) {
      d = it->second;
      memoized = true;
    }
  }
  if (!memoized) {
    d = default_plan(entries, request);
    if (cache) cache->defaults.emplace(fingerprint, d);
  }
  if (!d) {
    // A head_dim no kernel of this dtype has is the user's q, not the block geometry: say so, with what there is.
    std::vector<int> dims;
    for (const CatalogEntry& e : entries)
      if (e.dtype == request.dtype && std::find(dims.begin(), dims.end(), e.head_dim) == dims.end())
        dims.push_back(e.head_dim);
    std::sort(dims.begin(), dims.end());
    if (!dims.empty() && std::find(dims.begin(), dims.end(), request.head_dim) == dims.end()) {
      std::string served;
      for (int x : dims) served += (served.empty() ? "" : ", ") + std::to_string(x);
      throw Error(ErrorCode::kUnsupported, "q",
                  "head_dim " + std::to_string(request.head_dim) + " is not served: this build's kernels have head_dim " +
                      served + "; see `tessera inspect catalog`");
    }
    throw Error(ErrorCode::kUnsupported, "request",
                "no kernel of this build serves key " + key + " (dtype, head_dim, block geometry); see `tessera inspect catalog`");
  }
  Selection sel;
  sel.plan = *d;
  sel.plan_id = plan_id(*d);
  sel.source = SelectionSource::kDefault;
  sel.regime = regime.empty() ? key + "/default" : std::move(regime);
  sel.ranks_skipped = skipped;
  return sel;
}

}  // namespace

Selection select_plan(std::span<const CatalogEntry> entries, const PlanTable* table, const EligibilityRequest& request,
                      const FeatureVector& features, SelectorCache* cache) {
  const std::string key = request_key(request).str();
  if (table) {
    const RegimeLookup look = table->lookup(key, features);
    if (look.tree) {
      int skipped = 0;
      if (auto sel = ranked_selection(entries, *look.tree, look.leaf, key, request, cache, skipped)) return *sel;
      return default_selection(entries, key, request, cache, key + "/leaf" + std::to_string(look.leaf), skipped);
    }
  }
  return default_selection(entries, key, request, cache, "", 0);
}

RequestSelections select_for_every_regime(std::span<const CatalogEntry> entries, const PlanTable* table,
                                          const EligibilityRequest& request, SelectorCache* cache) {
  RequestSelections r;
  r.request = request;
  r.table = table;
  const std::string key = request_key(request).str();
  if (table) {
    if (auto it = table->trees.find(key); it != table->trees.end()) r.tree = &it->second;
  }
  r.reads_coarsen_cost = r.tree && (r.tree->splits_on(Feature::kCoarsenCost2) ||
                                    r.tree->splits_on(Feature::kCoarsenCost4) || r.tree->splits_on(Feature::kCoarsenCost8));
  // A leaf whose ranking has no eligible plan falls back to the default plan; where there is none either, the
  // leaf keeps select_plan's error, raised only when a request's features reach it.
  auto fallback = [&](std::string regime, int skipped) {
    try {
      r.by_leaf.emplace_back(default_selection(entries, key, request, cache, std::move(regime), skipped));
    } catch (const Error& e) {
      r.by_leaf.emplace_back(std::nullopt);
      r.error = e.message();
      r.error_argument = e.argument();
    }
  };
  if (r.tree) {
    for (int leaf = 0; leaf < static_cast<int>(r.tree->rankings.size()); ++leaf) {
      int skipped = 0;
      if (auto sel = ranked_selection(entries, *r.tree, leaf, key, request, cache, skipped))
        r.by_leaf.emplace_back(std::move(sel));
      else
        fallback(key + "/leaf" + std::to_string(leaf), skipped);
    }
  } else {
    fallback("", 0);
  }
  return r;
}

const Selection& RequestSelections::select(const FeatureVector& features) const {
  const std::optional<Selection>& s = tree ? by_leaf[static_cast<std::size_t>(table->leaf(*tree, features))] : by_leaf.front();
  if (!s) throw Error(ErrorCode::kUnsupported, error_argument, error);
  return *s;
}

}  // namespace tessera
