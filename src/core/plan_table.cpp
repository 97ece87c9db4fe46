#include "core/plan_table.hpp"

#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "core/catalog.hpp"
#include "core/json_number.hpp"
#include "core/plan.hpp"
#include "tessera/error.hpp"

namespace tessera {

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& what) { throw Error(ErrorCode::kFormatError, "plan_table", what); }

constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();

/// Field `name` of object `o` as an integer in [lo, hi] (json_integer), reported under "plan_table" as
/// "<where> field '<name>' is ..."; a missing field is reported like every other missing field.
int int_field(const json& o, const char* name, const std::string& where, std::int64_t lo, std::int64_t hi) {
  return static_cast<int>(json_integer(o.at(name), "plan_table", where + "field '" + name + "'", lo, hi));
}

/// feature_from_name, with the failure reported under "plan_table" and `where` it was found.
Feature feature_named(const std::string& name, const std::string& where) {
  try {
    return feature_from_name(name);
  } catch (const Error& e) {
    bad(where + ": " + e.message());
  }
}

/// The tree's key parses as "<arch>.<dtype>.d<D>.q<B_Q>.kv<B_KV>" and belongs to the table's arch.
void check_tree_key(const RegimeTree& t, const std::string& table_arch) {
  const std::optional<RequestKey> key = parse_request_key(t.key);
  if (!key) bad("tree key '" + t.key + "' is not \"<arch>.<dtype>.d<D>.q<B_Q>.kv<B_KV>\" (e.g. sm90a.bf16.d128.q64.kv64)");
  if (key->arch != table_arch)
    bad("tree key '" + t.key + "' is for arch " + key->arch + " but the table is for " + table_arch);
}

/// Checks one plan id of tree `t` (its base_plan or a ranked id); `subject` names it in every message, e.g. "tree
/// 'K' leaf 2 ranks plan 'ID'". The id must be non-empty and parse (parse_plan_id), its kernel entry must be in this
/// build's catalog (find_plan_entry over catalog(), which lists every entry of catalog.def, compiled or not), it must
/// serve the tree's key and its family must have kernels for the table's arch. The table's catalog_version is this
/// build's, so an id this build does not know cannot come from a legitimate table: it is corruption, not skipped.
void check_plan_id(const std::string& id, const RegimeTree& t, const std::string& table_arch,
                   const std::string& subject) {
  if (id.empty()) bad(subject + ": the plan id is empty");
  Plan p;
  try {
    p = parse_plan_id(id);
  } catch (const Error& e) {
    bad(subject + ", which does not parse: " + e.message());
  }
  if (!find_plan_entry(p))
    bad(subject + ", whose kernel entry '" + plan_kernel_name(p) + "' is not in this build's catalog");
  const std::string plan_key = plan_request_key(p).str();
  if (plan_key != t.key) bad(subject + " of another key ('" + plan_key + "')");
  if (!family_targets(p.family, p.arch))
    bad(subject + " of the " + std::string(family_name(p.family)) + " family, which has no kernels for " + table_arch);
}

/// The tree's base_plan is a plan id this build knows that serves the tree's key (check_plan_id).
void check_base_plan(const RegimeTree& t, const std::string& table_arch) {
  check_plan_id(t.base_plan, t, table_arch, "tree '" + t.key + "' base_plan '" + t.base_plan + "'");
}

/// Every ranked id passes check_plan_id, and no ranking names a plan twice.
void check_ranked_ids(const RegimeTree& t, const std::string& table_arch) {
  for (std::size_t l = 0; l < t.rankings.size(); ++l) {
    std::set<std::string> seen;
    for (const std::string& id : t.rankings[l]) {
      const std::string subject = "tree '" + t.key + "' leaf " + std::to_string(l) + " ranks plan '" + id + "'";
      check_plan_id(id, t, table_arch, subject);
      if (!seen.insert(id).second) bad(subject + " twice");
    }
  }
}

void check_tree(const RegimeTree& t) {
  if (t.nodes.empty()) bad("tree '" + t.key + "' has no nodes");
  const int n = static_cast<int>(t.nodes.size());
  // Every node must be reachable once from the root by forward links (children have larger indices): no cycles.
  for (int i = 0; i < n; ++i) {
    const TreeNode& node = t.nodes[i];
    if (node.feature == -1) {
      if (node.leaf < 0 || node.leaf >= static_cast<int>(t.rankings.size()))
        bad("tree '" + t.key + "' node " + std::to_string(i) + " names leaf " + std::to_string(node.leaf) +
            " of " + std::to_string(t.rankings.size()));
    } else {
      if (node.feature < 0 || node.feature >= kFeatureCount)
        bad("tree '" + t.key + "' node " + std::to_string(i) + " has feature index " + std::to_string(node.feature));
      if (node.left <= i || node.right <= i || node.left >= n || node.right >= n)
        bad("tree '" + t.key + "' node " + std::to_string(i) + " has child links out of range (must point forward)");
    }
  }
  if (!t.leaf_cases.empty() && t.leaf_cases.size() != t.rankings.size())
    bad("tree '" + t.key + "' has " + std::to_string(t.leaf_cases.size()) + " leaf_cases for " +
        std::to_string(t.rankings.size()) + " leaves");
  for (std::size_t l = 0; l < t.rankings.size(); ++l) {
    if (t.rankings[l].empty() || t.rankings[l].back() != t.base_plan)
      bad("tree '" + t.key + "' leaf " + std::to_string(l) + " ranking does not end with the base plan '" +
          t.base_plan + "'");
  }
}

}  // namespace

RegimeLookup PlanTable::lookup(const std::string& key, const FeatureVector& features) const {
  RegimeLookup r;
  auto it = trees.find(key);
  if (it == trees.end()) return r;
  const RegimeTree& t = it->second;
  r.tree = &t;
  r.leaf = leaf(t, features);
  r.ranking = &t.rankings[r.leaf];
  return r;
}

int PlanTable::leaf(const RegimeTree& t, const FeatureVector& features) const {
  int i = 0;
  while (t.nodes[i].feature != -1) {
    const TreeNode& n = t.nodes[i];
    const int b = schema.bucket(static_cast<Feature>(n.feature), features[n.feature]);
    i = b <= n.threshold ? n.left : n.right;
  }
  return t.nodes[i].leaf;
}

std::string plan_table_to_json(const PlanTable& table) {
  json j;
  j["format"] = "tessera-plan-table";
  j["format_version"] = table.format_version;
  j["catalog_version"] = table.catalog_version;
  j["arch"] = table.arch;
  j["gpu_name"] = table.gpu_name;
  json schema = json::array();
  for (int f = 0; f < kFeatureCount; ++f)
    schema.push_back({{"name", feature_name(static_cast<Feature>(f))}, {"edges", table.schema.edges[f]}});
  j["feature_schema"] = schema;
  json trees = json::array();
  for (const auto& [key, t] : table.trees) {
    json nodes = json::array();
    for (const TreeNode& n : t.nodes) {
      if (n.feature == -1)
        nodes.push_back({{"leaf", n.leaf}});
      else
        nodes.push_back({{"feature", feature_name(static_cast<Feature>(n.feature))},
                         {"threshold", n.threshold},
                         {"left", n.left},
                         {"right", n.right}});
    }
    trees.push_back({{"key", key},
                     {"base_plan", t.base_plan},
                     {"nodes", nodes},
                     {"rankings", t.rankings},
                     {"leaf_cases", t.leaf_cases}});
  }
  j["tables"] = trees;
  return j.dump(1);
}

PlanTable plan_table_from_json(const std::string& text, const std::string& expected_catalog_version) {
  // nlohmann's parser stops at a NUL byte as at the end of the input: whatever follows one would go unread.
  if (const std::size_t nul = text.find('\0'); nul != std::string::npos)
    bad("not valid JSON: a NUL byte at offset " + std::to_string(nul));
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    bad(std::string("not valid JSON: ") + e.what());
  }
  PlanTable t;
  try {
    if (!j.is_object() || j.value("format", "") != "tessera-plan-table") bad("not a tessera plan table (field 'format')");
    t.format_version = int_field(j, "format_version", "", 0, kIntMax);
    if (t.format_version != kPlanTableFormatVersion)
      bad("format_version " + std::to_string(t.format_version) + " is not the supported version " +
          std::to_string(kPlanTableFormatVersion));
    t.catalog_version = j.at("catalog_version").get<std::string>();
    if (!expected_catalog_version.empty() && t.catalog_version != expected_catalog_version)
      bad("catalog_version '" + t.catalog_version + "' does not match this build's catalog '" +
          expected_catalog_version + "'");
    t.arch = j.at("arch").get<std::string>();
    if (!arch_from_name(t.arch))
      bad("arch '" + t.arch + "' is not a known architecture (sm80, sm86, sm89, sm90a, sm120)");
    t.gpu_name = j.value("gpu_name", "");
    const json& schema = j.at("feature_schema");
    if (!schema.is_array() || schema.size() != static_cast<std::size_t>(kFeatureCount))
      bad("feature_schema must list " + std::to_string(kFeatureCount) + " features");
    for (const json& f : schema) {
      const Feature feat = feature_named(f.at("name").get<std::string>(), "feature_schema");
      const std::string where = "feature_schema '" + std::string(feature_name(feat)) + "'";
      const json& jedges = f.at("edges");
      if (!jedges.is_array()) bad(where + " field 'edges' is not an array of numbers");
      std::vector<double> edges;
      for (std::size_t i = 0; i < jedges.size(); ++i)
        edges.push_back(json_number(jedges[i], "plan_table", where + " edge " + std::to_string(i)));
      for (std::size_t i = 1; i < edges.size(); ++i)
        if (!(edges[i - 1] < edges[i])) bad("bucket edges of '" + std::string(feature_name(feat)) + "' are not increasing");
      t.schema.edges[static_cast<int>(feat)] = std::move(edges);
    }
    const json& tables = j.at("tables");
    if (!tables.is_array()) bad("field 'tables' is not an array of trees");
    if (tables.empty()) bad("the table has no trees (field 'tables' is empty)");
    for (const json& jt : tables) {
      RegimeTree tree;
      tree.key = jt.at("key").get<std::string>();
      const std::string where = "tree '" + tree.key + "'";
      tree.base_plan = jt.at("base_plan").get<std::string>();
      for (const json& n : jt.at("nodes")) {
        TreeNode node;
        const std::string at = where + " node " + std::to_string(tree.nodes.size());
        if (n.contains("leaf")) {
          node.leaf = int_field(n, "leaf", at + " ", 0, kIntMax);
        } else {
          node.feature = static_cast<int>(feature_named(n.at("feature").get<std::string>(), at));
          // Buckets of a feature with E edges are 0..E; a threshold outside [0, E] could not split.
          const std::int64_t buckets = static_cast<std::int64_t>(t.schema.edges[node.feature].size());
          node.threshold = int_field(n, "threshold", at + " ", 0, buckets);
          node.left = int_field(n, "left", at + " ", 0, kIntMax);
          node.right = int_field(n, "right", at + " ", 0, kIntMax);
        }
        tree.nodes.push_back(node);
      }
      tree.rankings = jt.at("rankings").get<std::vector<std::vector<std::string>>>();
      if (jt.contains("leaf_cases")) {
        const json& lc = jt.at("leaf_cases");
        if (!lc.is_array()) bad(where + " field 'leaf_cases' is not an array of integers");
        for (std::size_t l = 0; l < lc.size(); ++l)
          tree.leaf_cases.push_back(static_cast<int>(
              json_integer(lc[l], "plan_table", where + " leaf_cases[" + std::to_string(l) + "]", 0, kIntMax)));
      }
      // The base plan before the structure (every ranking ends with it, so a bad one is reported as itself), the
      // ranked ids after it (a ranking that does not end with the base plan is reported as that).
      check_tree_key(tree, t.arch);
      check_base_plan(tree, t.arch);
      check_tree(tree);
      check_ranked_ids(tree, t.arch);
      if (!t.trees.emplace(tree.key, tree).second) bad("key '" + tree.key + "' appears twice");
    }
  } catch (const json::exception& e) {
    bad(std::string("missing or mistyped field: ") + e.what());
  }
  return t;
}

PlanTable plan_table_for_arch(const std::string& json, std::string_view device_arch,
                              const std::string& expected_catalog_version) {
  PlanTable t = plan_table_from_json(json, expected_catalog_version);
  if (t.arch != device_arch) bad("table for " + t.arch + ", this GPU is " + std::string(device_arch));
  return t;
}

}  // namespace tessera
