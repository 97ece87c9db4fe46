#include "core/table_compiler.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/json_number.hpp"
#include "tessera/error.hpp"

namespace tessera {

namespace {

using nlohmann::json;

/// One case of one key: its features and the latency of every plan measured valid on it.
struct Case {
  std::string id;
  std::string source;
  std::string request;  // cross-validation group
  FeatureVector features{};
  BucketVector buckets{};
  std::map<std::string, double> latency;  // valid plans only
  double best = std::numeric_limits<double>::infinity();
};

std::vector<Case> gather_cases(const std::vector<const ProfileRecord*>& recs, const FeatureSchema& schema) {
  std::map<std::string, Case> by_id;
  for (const ProfileRecord* r : recs) {
    Case& c = by_id[r->case_id];
    c.id = r->case_id;
    c.source = r->source;
    c.request = r->request.empty() ? r->source : r->request;
    c.features = r->features;
    if (r->valid && r->latency_us > 0) {
      c.latency[r->plan] = r->latency_us;
      c.best = std::min(c.best, r->latency_us);
    }
  }
  std::vector<Case> cases;
  for (auto& [id, c] : by_id) {
    if (c.latency.empty()) continue;  // nothing valid: cannot rank on it
    c.buckets = bucketize(schema, c.features);
    cases.push_back(std::move(c));
  }
  return cases;
}

/// Latency of the plan a ranking selects for case c: the first ranked plan valid on c; the worst measured if none.
/// The plan the ranking selects for `c` (first measured valid) and its latency; the slowest valid plan when none
/// of the ranking was measured valid (a pessimistic stand-in).
std::pair<std::string, double> selected_plan(const std::vector<std::string>& ranking, const Case& c) {
  for (const auto& p : ranking) {
    auto it = c.latency.find(p);
    if (it != c.latency.end()) return {p, it->second};
  }
  std::pair<std::string, double> worst{"", 0};
  for (const auto& [p, l] : c.latency)
    if (l > worst.second) worst = {p, l};
  return worst;
}

double selected_latency(const std::vector<std::string>& ranking, const Case& c) {
  return selected_plan(ranking, c).second;
}

/// Ranks plans valid on every case of `idx` by geometric-mean latency; ends with the base plan.
std::vector<std::string> rank_plans(const std::vector<Case>& cases, const std::vector<int>& idx,
                                    const std::string& base_plan) {
  std::map<std::string, std::pair<int, double>> acc;  // plan -> (cases valid, sum log latency)
  for (int i : idx)
    for (const auto& [p, l] : cases[i].latency) {
      auto& a = acc[p];
      a.first += 1;
      a.second += std::log(l);
    }
  std::vector<std::pair<double, std::string>> ranked;
  for (const auto& [p, a] : acc)
    if (a.first == static_cast<int>(idx.size())) ranked.emplace_back(a.second / a.first, p);
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::string> out;
  for (const auto& [g, p] : ranked) {
    out.push_back(p);
    if (p == base_plan) break;  // plans after the always-eligible base plan are never reached
  }
  if (out.empty() || out.back() != base_plan) out.push_back(base_plan);
  return out;
}

double log_regret(const std::vector<Case>& cases, const std::vector<int>& idx, const std::vector<std::string>& ranking) {
  double s = 0;
  for (int i : idx) s += std::log(selected_latency(ranking, cases[i]) / cases[i].best);
  return s;
}

struct Grower {
  const std::vector<Case>& cases;
  const std::string& base_plan;
  int min_leaf;
  RegimeTree tree;

  int grow(const std::vector<int>& idx, int depth) {
    const int node_index = static_cast<int>(tree.nodes.size());
    tree.nodes.emplace_back();
    const auto ranking = rank_plans(cases, idx, base_plan);
    const double here = log_regret(cases, idx, ranking);
    double best_cost = here - 1e-9;
    int best_f = -1, best_t = 0;
    if (depth > 0 && static_cast<int>(idx.size()) >= 2 * min_leaf) {
      for (int f = 0; f < kFeatureCount; ++f) {
        std::set<int> values;
        for (int i : idx) values.insert(cases[i].buckets[f]);
        if (values.size() < 2) continue;
        for (auto it = values.begin(); std::next(it) != values.end(); ++it) {
          std::vector<int> l, r;
          for (int i : idx) (cases[i].buckets[f] <= *it ? l : r).push_back(i);
          if (static_cast<int>(l.size()) < min_leaf || static_cast<int>(r.size()) < min_leaf) continue;
          const double cost = log_regret(cases, l, rank_plans(cases, l, base_plan)) +
                              log_regret(cases, r, rank_plans(cases, r, base_plan));
          if (cost < best_cost) {
            best_cost = cost;
            best_f = f;
            best_t = *it;
          }
        }
      }
    }
    if (best_f < 0) {
      tree.nodes[node_index].leaf = static_cast<int>(tree.rankings.size());
      tree.rankings.push_back(ranking);
      tree.leaf_cases.push_back(static_cast<int>(idx.size()));
      return node_index;
    }
    std::vector<int> l, r;
    for (int i : idx) (cases[i].buckets[best_f] <= best_t ? l : r).push_back(i);
    tree.nodes[node_index].feature = best_f;
    tree.nodes[node_index].threshold = best_t;
    const int left = grow(l, depth - 1);
    const int right = grow(r, depth - 1);
    tree.nodes[node_index].left = left;
    tree.nodes[node_index].right = right;
    return node_index;
  }
};

RegimeTree grow_tree(const std::string& key, const std::vector<Case>& cases, const std::vector<int>& idx,
                     const std::string& base_plan, int depth, int min_leaf) {
  Grower g{cases, base_plan, min_leaf, {}};
  g.tree.key = key;
  g.tree.base_plan = base_plan;
  g.grow(idx, depth);
  return g.tree;
}

std::string default_base_plan(const std::vector<Case>& cases) {
  std::map<std::string, std::pair<int, double>> acc;
  for (const Case& c : cases)
    for (const auto& [p, l] : c.latency) {
      acc[p].first += 1;
      acc[p].second += std::log(l);
    }
  std::string best;
  std::pair<int, double> best_score{-1, 0};
  for (const auto& [p, a] : acc) {
    const double g = a.second / a.first;
    if (a.first > best_score.first || (a.first == best_score.first && g < best_score.second)) {
      best = p;
      best_score = {a.first, g};
    }
  }
  return best;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 1;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

namespace {

/// The record's field `name` (a JSON string or boolean), else a format error naming the field.
const json& record_field(const json& j, const char* name) {
  if (!j.is_object()) throw Error(ErrorCode::kFormatError, "profile", fmt::format("a record is a JSON object, got {}", j.type_name()));
  const auto it = j.find(name);
  if (it == j.end()) throw Error(ErrorCode::kFormatError, "profile", fmt::format("field '{}' missing", name));
  return *it;
}

std::string string_field(const json& j, const char* name, bool required = true) {
  if (!required && j.is_object() && !j.contains(name)) return "";
  const json& v = record_field(j, name);
  if (!v.is_string())
    throw Error(ErrorCode::kFormatError, "profile", fmt::format("field '{}' must be a string, got {}", name, v.type_name()));
  return v.get<std::string>();
}

bool bool_field(const json& j, const char* name) {
  const json& v = record_field(j, name);
  if (!v.is_boolean())
    throw Error(ErrorCode::kFormatError, "profile", fmt::format("field '{}' must be true or false, got {}", name, v.type_name()));
  return v.get<bool>();
}

}  // namespace

ProfileRecord profile_record_from_json(const std::string& line, FeaturePresence* present) {
  ProfileRecord r;
  // nlohmann's parser stops at a NUL byte as at the end of the input: whatever follows one would go unread.
  if (const std::size_t nul = line.find('\0'); nul != std::string::npos)
    throw Error(ErrorCode::kFormatError, "profile", fmt::format("not a JSON record: a NUL byte at column {}", nul + 1));
  try {
    const json j = json::parse(line);
    r.case_id = string_field(j, "case");
    r.source = string_field(j, "source");
    r.request = string_field(j, "request", false);
    r.split = string_field(j, "split");
    if (r.split != "profile" && r.split != "eval")
      throw Error(ErrorCode::kFormatError, "profile", "field 'split' must be \"profile\" or \"eval\", got \"" + r.split + "\"");
    r.key = string_field(j, "key");
    const json& features = record_field(j, "features");
    if (!features.is_object())
      throw Error(ErrorCode::kFormatError, "profile",
                  fmt::format("field 'features' must be an object of feature values, got {}", features.type_name()));
    FeaturePresence seen{};
    for (const auto& [name, v] : features.items()) {
      // An unknown name is this record's fault: the error names "profile" and the field, not "feature".
      int f = -1;
      for (int i = 0; i < kFeatureCount && f < 0; ++i)
        if (feature_name(static_cast<Feature>(i)) == name) f = i;
      if (f < 0)
        throw Error(ErrorCode::kFormatError, "profile", "field 'features': unknown feature name '" + name + "'");
      r.features[f] = json_number(v, "profile", "feature '" + name + "'");
      seen[f] = true;
    }
    if (present) *present = seen;
    for (int f = 0; f < kFeatureCount && !present; ++f)
      if (!seen[f])
        throw Error(ErrorCode::kFormatError, "profile",
                    fmt::format("field 'features' lacks '{}' (a record of an older feature schema: "
                                "`tessera profile-refeature` fills it in)",
                                feature_name(static_cast<Feature>(f))));
    r.plan = string_field(j, "plan");
    r.latency_us = json_number(record_field(j, "latency_us"), "profile", "field 'latency_us'");
    r.valid = bool_field(j, "valid");
    r.role = string_field(j, "role", false);
  } catch (const json::exception& e) {
    throw Error(ErrorCode::kFormatError, "profile", std::string("bad record: ") + e.what());
  }
  return r;
}

std::string profile_record_to_json(const ProfileRecord& r) {
  json f = json::object();
  for (int i = 0; i < kFeatureCount; ++i) f[std::string(feature_name(static_cast<Feature>(i)))] = r.features[i];
  json j = {{"case", r.case_id}, {"source", r.source}, {"split", r.split},         {"key", r.key},
            {"features", f},     {"plan", r.plan},     {"latency_us", r.latency_us}, {"valid", r.valid}};
  if (!r.role.empty()) j["role"] = r.role;
  if (!r.request.empty()) j["request"] = r.request;
  return j.dump();
}

PlanTable compile_plan_table(const std::vector<ProfileRecord>& records, const CompileOptions& options,
                             std::vector<KeyReport>* reports) {
  if (options.min_leaf_cases < 1) throw Error(ErrorCode::kInvalidArgument, "min_leaf_cases", "must be >= 1");
  PlanTable table;
  std::map<std::string, std::vector<const ProfileRecord*>> by_key;
  for (const ProfileRecord& r : records)
    if (r.split == "profile") by_key[r.key].push_back(&r);
  for (const auto& [key, recs] : by_key) {
    const std::vector<Case> cases = gather_cases(recs, table.schema);
    if (cases.empty()) continue;
    auto bp = options.base_plans.find(key);
    const std::string base = bp != options.base_plans.end() ? bp->second : default_base_plan(cases);

    // Folds by request: requests sorted by name (so each source's requests are adjacent), dealt round-robin,
    // so every fold holds whole requests and, where a source has several, requests of every source.
    std::vector<std::string> requests;
    for (const Case& c : cases) requests.push_back(c.request);
    std::sort(requests.begin(), requests.end());
    requests.erase(std::unique(requests.begin(), requests.end()), requests.end());
    const int k = std::min<int>(options.folds, static_cast<int>(requests.size()));
    std::map<std::string, int> fold_of;
    for (std::size_t i = 0; i < requests.size(); ++i) fold_of[requests[i]] = static_cast<int>(i) % std::max(k, 1);

    KeyReport rep;
    rep.key = key;
    rep.cases = static_cast<int>(cases.size());
    int chosen = 0;
    if (k >= 2) {
      double best = std::numeric_limits<double>::infinity();
      for (int depth = 0; depth <= options.max_depth; ++depth) {
        double total = 0;
        for (int f = 0; f < k; ++f) {
          std::vector<int> train, test;
          for (int i = 0; i < static_cast<int>(cases.size()); ++i)
            (fold_of[cases[i].request] == f ? test : train).push_back(i);
          if (train.empty() || test.empty()) continue;
          // The fold's tree stands in for the final tree grown on all cases: its leaf minimum shrinks with the
          // training set, so that a split the final tree may make (each side >= min_leaf_cases of all cases)
          // can be made, and validated, here too.
          const int fold_min_leaf = std::max(
              1, static_cast<int>(std::floor(static_cast<double>(options.min_leaf_cases) *
                                             static_cast<double>(train.size()) / static_cast<double>(cases.size()))));
          PlanTable t;
          t.trees[key] = grow_tree(key, cases, train, base, depth, fold_min_leaf);
          for (int i : test) {
            const auto look = t.lookup(key, cases[i].features);
            total += std::log(selected_latency(*look.ranking, cases[i]) / cases[i].best);
          }
        }
        const double mean = total / static_cast<double>(cases.size());
        rep.cv_log_regret.push_back(mean);
        if (mean < best - 1e-12) {
          best = mean;
          chosen = depth;
        }
      }
    }
    std::vector<int> all(cases.size());
    for (std::size_t i = 0; i < cases.size(); ++i) all[i] = static_cast<int>(i);
    table.trees[key] = grow_tree(key, cases, all, base, chosen, options.min_leaf_cases);
    rep.chosen_depth = chosen;
    rep.leaves = static_cast<int>(table.trees[key].rankings.size());
    if (reports) reports->push_back(rep);
  }
  return table;
}

RegretReport evaluate_plan_table(const PlanTable& table, const std::vector<ProfileRecord>& records,
                                 const std::map<std::string, std::string>& direct_plans) {
  std::map<std::string, std::vector<const ProfileRecord*>> by_key;
  for (const ProfileRecord& r : records) by_key[r.key].push_back(&r);
  RegretReport rep;
  std::vector<double> regrets;
  double log_speedup = 0;
  for (const auto& [key, recs] : by_key) {
    const std::vector<Case> cases = gather_cases(recs, table.schema);
    auto dp = direct_plans.find(key);
    for (const Case& c : cases) {
      const auto look = table.lookup(key, c.features);
      if (!look.tree) {
        rep.cases_missing_key += 1;
        continue;
      }
      const auto [sel_plan, sel] = selected_plan(*look.ranking, c);
      regrets.push_back(sel / c.best);
      CaseRegret cr{c.id, key, c.source, sel_plan, sel, "", c.best, sel / c.best};
      for (const auto& [p, l] : c.latency)
        if (l == c.best) cr.best_plan = p;
      rep.per_case.push_back(std::move(cr));
      if (dp != direct_plans.end()) {
        auto d = c.latency.find(dp->second);
        if (d != c.latency.end()) {
          log_speedup += std::log(d->second / sel);
          rep.direct_cases += 1;
        }
      }
    }
  }
  rep.cases = static_cast<int>(regrets.size());
  if (!regrets.empty()) {
    double s = 0;
    for (double r : regrets) s += std::log(r);
    rep.geomean_regret = std::exp(s / static_cast<double>(regrets.size()));
    rep.p95_regret = percentile(regrets, 0.95);
    rep.p99_regret = percentile(regrets, 0.99);
    rep.max_regret = *std::max_element(regrets.begin(), regrets.end());
  }
  if (rep.direct_cases > 0) rep.geomean_speedup_over_direct = std::exp(log_speedup / rep.direct_cases);
  return rep;
}

}  // namespace tessera
