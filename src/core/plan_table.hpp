#pragma once
// The plan table Pi_A and its versioned artifact (DESIGN.md section 6). Inside each request-key group a
// decision tree over bucketed features leads to a regime (leaf) whose ranking lists plan ids, fastest first by
// geometric-mean latency over the leaf's profiled cases, and always ends with the key's base plan.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/features.hpp"

namespace tessera {

/// Version of the artifact format this build reads and writes. Bump on any incompatible change. Version 2 added the
/// feature row_imbalance (a version-1 table is rejected by its format_version, before its feature schema is read);
/// version 3 the request-size features grid_rows and active_blocks (issue 19: tables profiled at whole-layer sizes);
/// version 4 the mask features coarsen_cost2/4/8 (what grouping 2, 4, 8 query blocks per CTA costs in computed pairs).
inline constexpr int kPlanTableFormatVersion = 4;

/// One node of a regime tree. Internal: feature >= 0, cases with bucket(feature) <= threshold go left.
/// Leaf: feature == -1 and `leaf` indexes RegimeTree::rankings.
struct TreeNode {
  int feature = -1;
  int threshold = 0;
  int left = -1;
  int right = -1;
  int leaf = -1;
  bool operator==(const TreeNode&) const = default;
};

/// The plan table of one request key.
struct RegimeTree {
  std::string key;                                ///< RequestKey::str()
  std::string base_plan;                          ///< eligible for every request of the key
  std::vector<TreeNode> nodes;                    ///< nodes[0] is the root
  std::vector<std::vector<std::string>> rankings; ///< per leaf, plan ids; each ends with base_plan
  std::vector<int> leaf_cases;                    ///< per leaf, profiled cases it was ranked on
  bool operator==(const RegimeTree&) const = default;
  /// Whether any node splits on `f` (a feature the tree never reads need not be computed for its requests).
  bool splits_on(Feature f) const {
    for (const TreeNode& n : nodes)
      if (n.feature == static_cast<int>(f)) return true;
    return false;
  }
};

/// Result of a lookup: the regime (leaf) and its ranking.
struct RegimeLookup {
  const RegimeTree* tree = nullptr;  ///< null when the key was never profiled
  int leaf = -1;
  const std::vector<std::string>* ranking = nullptr;
};

/// The whole artifact: catalog version, feature schema, one tree per profiled key.
struct PlanTable {
  int format_version = kPlanTableFormatVersion;
  std::string catalog_version;  ///< must match the running catalog's version
  std::string arch;             ///< GPU the table was profiled on, e.g. "sm90a"
  std::string gpu_name;         ///< e.g. "NVIDIA H200"
  FeatureSchema schema = FeatureSchema::default_schema();
  std::map<std::string, RegimeTree> trees;

  /// Walks the tree of `key`; tree == nullptr in the result when the key is absent.
  RegimeLookup lookup(const std::string& key, const FeatureVector& features) const;
  /// The leaf (regime index into tree.rankings) that `features` reach in `tree`, one of this table's trees.
  int leaf(const RegimeTree& tree, const FeatureVector& features) const;
  bool operator==(const PlanTable&) const = default;
};

/// Serializes to the JSON artifact (format documented in docs/selection.md).
std::string plan_table_to_json(const PlanTable& table);

/// Parses and checks an artifact. Every failure throws Error(kFormatError, "plan_table", reason): malformed JSON, a
/// missing or mistyped field (integers must be JSON integers in range: format_version, a node's leaf, left and right
/// >= 0, threshold in [0, number of edges of its feature], leaf_cases >= 0 and one per leaf; edges must be JSON
/// numbers; the message names the field), a wrong format name or version, a catalog version different from
/// `expected_catalog_version` (when non-empty), an unknown arch, unknown feature names, edges not increasing, a tree
/// key that is not "<arch>.<dtype>.d<D>.q<B_Q>.kv<B_KV>" (parse_request_key) or whose arch is not the table's, a key
/// twice, no tree at all (an empty "tables"), out-of-range node links, cycles, rankings that do not end with the base
/// plan, or a base_plan or ranked plan id that is empty, does not parse (parse_plan_id), names a kernel entry this
/// build's catalog does not have, serves another key (another arch, dtype, head_dim, B_Q or B_KV) or a family with
/// no kernels for the table's arch; and a plan id twice in one ranking. A table of this build's catalog version
/// cannot name ids this build does not know, so such an id is corruption, never skipped; the message names the
/// tree key, the leaf (or base_plan) and the id.
PlanTable plan_table_from_json(const std::string& json, const std::string& expected_catalog_version = "");

/// plan_table_from_json, then checks that the table was profiled for `device_arch` (the running GPU's arch name,
/// e.g. "sm90a"). Throws Error(kFormatError, "plan_table", "table for sm80, this GPU is sm90a") for a table of
/// another arch, which the runtimes treat like a corrupt table (documented default plans).
PlanTable plan_table_for_arch(const std::string& json, std::string_view device_arch,
                              const std::string& expected_catalog_version);

}  // namespace tessera
