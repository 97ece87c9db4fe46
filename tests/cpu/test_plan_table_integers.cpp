// Plan-table artifact integers are read strictly: a JSON integer in range, never wrapped (nlohmann's get<int>()
// reads 4294967297 as 1), truncated (1.9 as 1) or converted from a boolean; the error names the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/plan_table.hpp"
#include "expect_error.hpp"
#include "tessera/error.hpp"

namespace tessera {
namespace {

using nlohmann::json;

constexpr const char* kKey = "sm90a.bf16.d128.q64.kv64";
// Plan ids of kKey this build's catalog has (a loaded table ranks no other ids).
constexpr const char* kBase = "sm90a.mma.bf16.d128.q64d.kv64d.g1.tasc.split1.s2.w4";
constexpr const char* kPlanA = "sm90a.mma.bf16.d128.q64d.kv64d.g1.tasc.split2.s2.w4";
constexpr const char* kPlanB = "sm90a.mma.bf16.d128.q64d.kv64d.g1.tasc.split4.s2.w4";

// A valid table: the root splits on density at bucket 1 into two leaves (the schema is the default one).
json good_table() {
  json j = json::parse(plan_table_to_json(PlanTable{}));
  j["catalog_version"] = "cat-1";
  j["arch"] = "sm90a";
  j["tables"] = json::array();
  j["tables"].push_back({{"key", kKey},
                         {"base_plan", kBase},
                         {"nodes", json::array({json{{"feature", "density"}, {"threshold", 1}, {"left", 1}, {"right", 2}},
                                                json{{"leaf", 0}}, json{{"leaf", 1}}})},
                         {"rankings", json::array({json::array({kPlanA, kBase}), json::array({kPlanB, kBase})})},
                         {"leaf_cases", json::array({40, 50})}});
  return j;
}

void expect_rejected(const json& j, const std::string& fragment) {
  expect_error([&] { plan_table_from_json(j.dump()); }, ErrorCode::kFormatError, "plan_table", fragment, fragment);
}

constexpr std::int64_t k2to32 = std::int64_t(1) << 32;

TEST(PlanTableIntegers, GoodTableLoads) {
  const PlanTable t = plan_table_from_json(good_table().dump());
  EXPECT_EQ(t.trees.at(kKey).nodes[0].threshold, 1);
  EXPECT_EQ(t.trees.at(kKey).leaf_cases, (std::vector<int>{40, 50}));
}

TEST(PlanTableIntegers, FormatVersionMustBeTheIntegerOne) {
  for (const json& v : {json(k2to32 + 1), json(1.9), json(1.0), json(true), json("1"), json(-1)}) {
    json j = good_table();
    j["format_version"] = v;
    expect_rejected(j, "field 'format_version' is " + v.dump());
  }
}

TEST(PlanTableIntegers, NodeFieldsAreExactIntegersInRange) {
  const std::string node0 = std::string("tree '") + kKey + "' node 0 field ";
  // Each field at value + 2^32 (would wrap back to the valid value), as a float, a boolean and negative.
  for (const char* field : {"left", "right", "threshold"}) {
    const json valid = good_table()["tables"][0]["nodes"][0][field];
    for (const json& v : {json(valid.get<std::int64_t>() + k2to32), json(valid.get<double>() + 0.5), json(true),
                          json(-1)}) {
      json j = good_table();
      j["tables"][0]["nodes"][0][field] = v;
      expect_rejected(j, node0 + "'" + field + "' is " + v.dump());
    }
  }
  // A threshold past the feature's buckets (density has E edges: buckets 0..E).
  json j = good_table();
  const std::size_t edges = j["feature_schema"][static_cast<int>(Feature::kDensity)]["edges"].size();
  j["tables"][0]["nodes"][0]["threshold"] = edges + 1;
  expect_rejected(j, node0 + "'threshold' is " + std::to_string(edges + 1));
  j["tables"][0]["nodes"][0]["threshold"] = edges;  // the last bucket: accepted
  EXPECT_NO_THROW(plan_table_from_json(j.dump()));
  // A leaf index + 2^32, a float and a negative one.
  for (const json& v : {json(k2to32 + 1), json(1.0), json(-1)}) {
    json k = good_table();
    k["tables"][0]["nodes"][2]["leaf"] = v;
    expect_rejected(k, std::string("tree '") + kKey + "' node 2 field 'leaf' is " + v.dump());
  }
}

TEST(PlanTableIntegers, LeafCasesAreNonNegativeIntegersOnePerLeaf) {
  for (const json& v : {json(-40), json(40.5), json(k2to32 + 40), json("40")}) {
    json j = good_table();
    j["tables"][0]["leaf_cases"][1] = v;
    expect_rejected(j, std::string("tree '") + kKey + "' leaf_cases[1] is " + v.dump());
  }
  json j = good_table();
  j["tables"][0]["leaf_cases"] = 40;
  expect_rejected(j, "field 'leaf_cases' is not an array");
  j["tables"][0]["leaf_cases"] = {40};
  expect_rejected(j, "has 1 leaf_cases for 2 leaves");
  j["tables"][0].erase("leaf_cases");  // optional
  EXPECT_NO_THROW(plan_table_from_json(j.dump()));
}

TEST(PlanTableIntegers, EdgesAreNumbers) {
  json j = good_table();
  j["feature_schema"][0]["edges"][0] = true;
  expect_rejected(j, "edge 0 is true, not a finite number");
  j["feature_schema"][0]["edges"] = "1,2";
  expect_rejected(j, "field 'edges' is not an array of numbers");
}

}  // namespace
}  // namespace tessera
