// `tessera profile-refeature`: case ids, features of regenerated corpus cases, and the re-featuring of records
// written under an older feature schema (docs/selection.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/table_compiler.hpp"
#include "tessera/error.hpp"
#include "tessera_corpus/family.hpp"
#include "tessera_corpus/profile_refeature.hpp"

namespace tessera::corpus {
namespace {

CorpusOptions small_corpus() {
  CorpusOptions o;
  o.small = true;
  return o;
}

// The id `tessera profile` writes for case `index` of a family.
std::string case_id(const std::string& family, int index, const CorpusOptions& opt) {
  return family + "/" + case_origin(family, index, opt).source_id + "/" + std::to_string(index);
}

ProfileRecord record_of(const std::string& id, const FeatureVector& features, const std::string& plan,
                        const std::string& key = "sm90a.bf16.d128.q64.kv64") {
  ProfileRecord r;
  r.case_id = id;
  r.source = parse_profile_case_id(id).source;
  r.request = r.source + "#0";
  r.split = "profile";
  r.key = key;
  r.features = features;
  r.plan = plan;
  r.latency_us = 10;
  r.valid = true;
  return r;
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const std::string& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(ProfileRefeature, ParsesCaseIds) {
  const ProfileCaseId c = parse_profile_case_id("Q64K64/q64-vsa-wan720/17");
  EXPECT_EQ(c.family, "Q64K64");
  EXPECT_EQ(c.source, "q64-vsa-wan720");
  EXPECT_EQ(c.index, 17);
  for (const char* bad : {"", "Q64K64", "Q64K64/17", "/src/1", "F//1", "F/src/"})
    expect_error([&] { parse_profile_case_id(bad); }, {"case", "<family>/<source>/<index>"});
  for (const char* bad : {"F/src/x", "F/src/-1", "F/src/1x", "F/src/021", "F/src/+1", "F/src/1/wholex"})
    expect_error([&] { parse_profile_case_id(bad); }, {"case", "canonical decimal"});
  EXPECT_FALSE(c.whole_request);
  // A whole request: the case's id with "/whole" appended; the rest parses as for the case.
  const ProfileCaseId w = parse_profile_case_id("Q64K64/q64-vsa-wan720/17/whole");
  EXPECT_TRUE(w.whole_request);
  EXPECT_EQ(w.family, "Q64K64");
  EXPECT_EQ(w.source, "q64-vsa-wan720");
  EXPECT_EQ(w.index, 17);
  for (const char* bad : {"/whole", "F/whole", "F/src/whole", "F//1/whole"})
    expect_error([&] { parse_profile_case_id(bad); }, {"case", bad});
}

// The request-size features count every query head: rows = B * H_q * n_qb, active = rows * mean_row_active, also
// for a mask shared by all heads (shape.heads = 1 < H_q).
TEST(ProfileRefeature, RequestSizeFeatures) {
  MaskStats s;
  s.shape = MaskShape{2, 1, 30, 40};
  s.mean_row_active = 4.5;
  const FeatureVector f = make_features(2, 12, 30 * 64, s);
  EXPECT_EQ(f[static_cast<int>(Feature::kBatchHeads)], 24.0);
  EXPECT_EQ(f[static_cast<int>(Feature::kGridRows)], 24.0 * 30);
  EXPECT_EQ(f[static_cast<int>(Feature::kActiveBlocks)], 24.0 * 30 * 4.5);
  EXPECT_EQ(feature_from_name("grid_rows"), Feature::kGridRows);
  EXPECT_EQ(feature_from_name("active_blocks"), Feature::kActiveBlocks);
}

// The features of a case come from its mask: checked against counts taken directly from the packed mask.
TEST(ProfileRefeature, CaseFeaturesCountTheMask) {
  const CorpusOptions opt = small_corpus();
  const Case c = make_case("Q64K64", 0, opt);
  const MaskStats s = case_mask_stats(c);
  const FeatureVector f = case_features(c, s);
  const double rows = static_cast<double>(c.mask.heads * c.mask.n_qb);
  const double active = static_cast<double>(c.mask.count());
  ASSERT_GT(active, 0);
  EXPECT_EQ(s.counters.active_blocks, c.mask.count());
  EXPECT_EQ(f[static_cast<int>(Feature::kBatchHeads)], static_cast<double>(c.mask.heads));
  EXPECT_EQ(f[static_cast<int>(Feature::kSeqLen)], static_cast<double>(c.meta.n_q));
  EXPECT_DOUBLE_EQ(f[static_cast<int>(Feature::kDensity)], active / (rows * static_cast<double>(c.mask.n_kvb)));
  EXPECT_DOUBLE_EQ(f[static_cast<int>(Feature::kMeanRowActive)], active / rows);
  std::int64_t max_row = 0;
  for (std::int64_t h = 0; h < c.mask.heads; ++h)
    for (std::int64_t q = 0; q < c.mask.n_qb; ++q) max_row = std::max(max_row, c.mask.row_count(h, q));
  EXPECT_EQ(s.counters.max_row_active, max_row);
  EXPECT_DOUBLE_EQ(f[static_cast<int>(Feature::kRowImbalance)], static_cast<double>(max_row) / (active / rows));
}

// Records of an older schema (a feature missing from the JSON) are parsed with presence flags, re-featured with
// the regenerated values, and then parse under the current schema; the features they did carry are checked.
TEST(ProfileRefeature, RoundTripFromAnOlderSchema) {
  const CorpusOptions opt = small_corpus();
  std::vector<ProfileRecord> truth;
  for (const auto& [family, index] : std::vector<std::pair<std::string, int>>{{"Q64K64", 0}, {"Q64K64", 1}, {"Q16K16", 2}}) {
    const std::string id = case_id(family, index, opt);
    const Case c = make_case(family, index, opt);
    const std::string key = "sm90a.bf16.d128.q" + std::to_string(c.meta.block_q) + ".kv" + std::to_string(c.meta.block_kv);
    for (const char* plan : {"p0", "p1"}) truth.push_back(record_of(id, case_features(c, case_mask_stats(c)), plan, key));
  }
  const std::string dropped(feature_name(Feature::kMeanRowActive));
  std::vector<ProfileRecord> records;
  std::vector<FeaturePresence> present;
  for (const ProfileRecord& r : truth) {
    nlohmann::json j = nlohmann::json::parse(profile_record_to_json(r));
    j["features"].erase(dropped);
    EXPECT_THROW(profile_record_from_json(j.dump()), Error);  // the current schema needs every feature
    FeaturePresence p{};
    records.push_back(profile_record_from_json(j.dump(), &p));
    present.push_back(p);
    EXPECT_FALSE(p[static_cast<int>(Feature::kMeanRowActive)]);
    EXPECT_TRUE(p[static_cast<int>(Feature::kDensity)]);
    EXPECT_EQ(records.back().features[static_cast<int>(Feature::kMeanRowActive)], 0.0);
  }
  EXPECT_EQ(refeature_records(records, present, opt, 2), 3);
  for (std::size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].features, truth[i].features) << records[i].case_id;
    EXPECT_EQ(records[i].plan, truth[i].plan);
    EXPECT_EQ(profile_record_from_json(profile_record_to_json(records[i])).features, truth[i].features);
  }
}

// A record whose key's blocks are not its case's (a 16x16 case under a 64x64 key) is refused, naming both.
TEST(ProfileRefeature, KeyBlocksMustBeTheCases) {
  const CorpusOptions opt = small_corpus();
  const std::string id = case_id("Q16K16", 2, opt);
  std::vector<ProfileRecord> recs{record_of(id, FeatureVector{}, "p0")};
  std::vector<FeaturePresence> present(1);
  expect_error([&] { refeature_records(recs, present, opt, 1); }, {id, "sm90a.bf16.d128.q64.kv64", "64x64", "16x16"});
}

// A whole request's record ("<case id>/whole") is re-featured from the whole request (every head of the layer), not
// from the stored case: its batch_heads is the model's head count.
TEST(ProfileRefeature, WholeRequestsAreRegeneratedWhole) {
  const CorpusOptions opt = small_corpus();
  const std::string id = case_id("Q64K64", 0, opt) + "/whole";
  const Case whole = make_whole_request("Q64K64", 0, opt);
  const Case stored = make_case("Q64K64", 0, opt);
  ASSERT_GT(whole.mask.heads, stored.mask.heads);
  std::vector<ProfileRecord> recs{record_of(id, FeatureVector{}, "p0")};
  FeaturePresence none{};
  EXPECT_EQ(refeature_records(recs, {none}, opt, 1), 1);
  EXPECT_EQ(recs[0].features, case_features(whole, case_mask_stats(whole)));
  EXPECT_EQ(recs[0].features[static_cast<int>(Feature::kBatchHeads)], static_cast<double>(whole.mask.heads));
}

TEST(ProfileRefeature, RejectsRecordsThatDoNotMatchTheCorpus) {
  const CorpusOptions opt = small_corpus();
  const std::string id = case_id("Q64K64", 0, opt);
  const Case c = make_case("Q64K64", 0, opt);
  const FeatureVector f = case_features(c, case_mask_stats(c));
  FeaturePresence all{};
  all.fill(true);
  // A recorded feature that differs from the regenerated mask's: named with the case.
  std::vector<ProfileRecord> recs{record_of(id, f, "p0")};
  recs[0].features[static_cast<int>(Feature::kDensity)] += 1e-9;
  expect_error([&] { refeature_records(recs, {all}, opt, 1); }, {id, "density", "records"});
  // The same value is fine when the feature was not recorded (an older schema).
  FeaturePresence no_density = all;
  no_density[static_cast<int>(Feature::kDensity)] = false;
  EXPECT_EQ(refeature_records(recs, {no_density}, opt, 1), 1);
  EXPECT_EQ(recs[0].features, f);
  // A source other than the corpus case's, an unknown family, an index out of range, a malformed id.
  const std::vector<std::pair<std::string, std::string>> bad_ids{
      {"Q64K64/not-a-source/0", "not-a-source"}, {"NoSuchFamily/src/0", "NoSuchFamily"},
      {"Q64K64/" + parse_profile_case_id(id).source + "/999999", "999999"}, {"Q64K64-0", "Q64K64-0"}};
  for (const auto& [bad, needle] : bad_ids) {
    std::vector<ProfileRecord> r{record_of(id, f, "p0")};
    r[0].case_id = bad;
    expect_error([&] { refeature_records(r, {all}, opt, 1); }, {needle, "records"});
    try {  // one message: the case once, no second "tessera: format error:" inside it
      refeature_records(r, {all}, opt, 1);
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find("tessera:", 1), std::string::npos) << what;
    }
  }
  expect_error([&] { refeature_records(recs, {}, opt, 1); }, {"present"});
}

}  // namespace
}  // namespace tessera::corpus
