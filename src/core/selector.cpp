#include "core/selector.hpp"

#include <algorithm>

#include "core/catalog.hpp"
#include "tessera/error.hpp"

namespace tessera {

namespace {

constexpr int kFactors[] = {2, 4, 8};
constexpr int kRefineFactors[] = {2, 3, 4, 6, 8};

std::vector<DimMapping> q_mappings(const CandidateOptions& o) {
  std::vector<DimMapping> m{{MappingKind::kDirect, 1}};
  if (o.include_refined)
    for (int f : kRefineFactors) m.push_back({MappingKind::kRefine, f});
  if (o.include_coarsened)
    for (int f : kFactors) m.push_back({MappingKind::kCoarsen, f});
  return m;
}

std::vector<DimMapping> kv_mappings(const CandidateOptions& o) {
  std::vector<DimMapping> m = q_mappings(o);
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
  for (const DimMapping& q : q_mappings(options)) {
    for (const DimMapping& kv : kv_mappings(options)) {
      const int tq = q.tile(request.block_q), tkv = kv.tile(request.block_kv);
      if (q.kind == MappingKind::kRefine && request.block_q % q.factor != 0) continue;
      if (kv.kind == MappingKind::kRefine && request.block_kv % kv.factor != 0) continue;
      for (const CatalogEntry& e : entries) {
        if (e.tile_q != tq || e.tile_kv != tkv || e.dtype != request.dtype || e.head_dim != request.head_dim) continue;
        for (int split : options.splits) {
          for (Traversal t : options.traversals) {
            Plan p = make_plan(e, request, q, kv, split, t);
            if (eligible(p, e, request)) out.push_back(p);
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
    // a table written by another build may name plans this build cannot parse: skipped
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

Selection select_plan(std::span<const CatalogEntry> entries, const PlanTable* table, const EligibilityRequest& request,
                      const FeatureVector& features, SelectorCache* cache) {
  const std::string key = request_key(request).str();
  auto parse = [&](const std::string& id) { return parse_ranked(id, cache); };
  auto try_id = [&](const std::string& id, Selection& out) -> bool {
    const std::optional<Plan> parsed = parse(id);
    if (!parsed) return false;
    const Plan& p = *parsed;
    const CatalogEntry* e = find_plan_entry(p, entries);
    if (!e || !eligible(p, *e, request)) return false;
    out.plan = p;
    out.plan_id = id;
    return true;
  };
  Selection sel;
  if (table) {
    const RegimeLookup look = table->lookup(key, features);
    if (look.tree) {
      sel.regime = key + "/leaf" + std::to_string(look.leaf);
      for (const std::string& id : *look.ranking) {
        if (try_id(id, sel)) {
          sel.source = id == look.tree->base_plan ? SelectionSource::kBase : SelectionSource::kTable;
          return sel;
        }
        sel.ranks_skipped += 1;
      }
    }
  }
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
  if (!d)
    throw Error(ErrorCode::kUnsupported, "request",
                "no kernel of this build serves key " + key + " (dtype, head_dim, block geometry); see `tessera inspect catalog`");
  sel.plan = *d;
  sel.plan_id = plan_id(*d);
  sel.source = SelectionSource::kDefault;
  if (sel.regime.empty()) sel.regime = key + "/default";
  return sel;
}

}  // namespace tessera
