// check_profile_record: the per-record checks of `tessera compile-table` (latency, split, role, plan id vs key, arch).
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "core/profile_record_check.hpp"
#include "core/table_compiler.hpp"
#include "tessera/error.hpp"

namespace tessera {
namespace {

ProfileRecord good() {
  ProfileRecord r;
  r.case_id = "F/s0/0";
  r.source = "s0";
  r.split = "profile";
  r.key = "sm90a.bf16.d64.q16.kv16";
  r.plan = "sm90a.mma.bf16.d64.q16d.kv16d.g1.tasc.split1.s2.w4";
  r.latency_us = 12.5;
  r.valid = true;
  return r;
}

void expect_format_error(const ProfileRecord& r, std::string_view arch, const std::string& needle) {
  try {
    check_profile_record(r, arch);
    ADD_FAILURE() << "accepted a record; expected an error mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kFormatError);
    EXPECT_NE(e.message().find(needle), std::string::npos) << e.message();
  }
}

TEST(ProfileRecordCheck, AcceptsAGoodRecord) {
  EXPECT_NO_THROW(check_profile_record(good(), "sm90a"));
  ProfileRecord r = good();
  r.role = "direct";
  r.split = "eval";
  EXPECT_NO_THROW(check_profile_record(r, ""));
  r.role = "default,direct";  // the default plan is often the Direct plan itself
  EXPECT_NO_THROW(check_profile_record(r, ""));
}

TEST(ProfileRecordCheck, RejectsBadLatency) {
  for (double l : {0.0, -1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    ProfileRecord r = good();
    r.latency_us = l;
    expect_format_error(r, "sm90a", "latency_us");
  }
}

TEST(ProfileRecordCheck, RejectsBadPlanKeyRoleSplitArch) {
  ProfileRecord r = good();
  r.plan = "sm90a.mma.bogus";
  expect_format_error(r, "sm90a", "'plan'");
  r = good();
  r.key = "sm90a.bf16.d128.q16.kv16";  // head_dim differs from the plan's
  expect_format_error(r, "sm90a", "'key'");
  r = good();
  r.key = "sm90a.bf16.d64.q16.kv32";
  expect_format_error(r, "sm90a", "'key'");
  r = good();
  r.role = "base";
  expect_format_error(r, "sm90a", "'role'");
  r = good();
  r.split = "profiling";
  expect_format_error(r, "sm90a", "'split'");
  expect_format_error(good(), "sm80", "--arch");
}

TEST(ProfileRecordCheck, CaseIdsParseAndNameTheRecordsSource) {
  ProfileRecord r = good();
  r.case_id = "STA-real/sta-hv768-b128/387";
  r.source = "sta-hv768-b128";
  EXPECT_NO_THROW(check_profile_record(r, "sm90a"));
  r.case_id = "F/a/b/0";  // a source may contain '/'
  r.source = "a/b";
  EXPECT_NO_THROW(check_profile_record(r, "sm90a"));
  r = good();
  r.source = "s1";
  expect_format_error(r, "sm90a", "field 'source' 's1' differs from the source 's0' of case 'F/s0/0'");
  for (const char* bad : {"c0", "", "F/s0", "/s0/0", "F//0", "F/s0/"}) {
    r = good();
    r.case_id = bad;
    expect_format_error(r, "sm90a", std::string("field 'case': case id '") + bad +
                                        "' is not \"<family>/<source>/<index>\"");
  }
  for (const char* index : {"021", "00", "-1", "+1", "1x", "x", "2147483648", "99999999999999999999"}) {
    r = good();
    r.case_id = std::string("F/s0/") + index;
    expect_format_error(r, "sm90a", std::string("has index '") + index + "', which is not a canonical decimal integer");
  }
}

TEST(ProfileRecordCheck, ParsesCaseIds) {
  const ProfileCaseId c = parse_profile_case_id("Q64K64/q64-vsa-wan720/17");
  EXPECT_EQ(c.family, "Q64K64");
  EXPECT_EQ(c.source, "q64-vsa-wan720");
  EXPECT_EQ(c.index, 17);
  EXPECT_EQ(parse_profile_case_id("F/s/0").index, 0);
  EXPECT_EQ(parse_profile_case_id("F/s/2147483647").index, 2147483647);
  try {
    parse_profile_case_id("STA-real/x/021");
    ADD_FAILURE() << "accepted a leading zero";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "case");
    EXPECT_NE(e.message().find("case id 'STA-real/x/021' has index '021'"), std::string::npos) << e.message();
  }
}

TEST(ProfileRecordCheck, RejectsNegativeOrNonFiniteFeatures) {
  ProfileRecord r = good();
  r.features[2] = -0.1;
  expect_format_error(r, "", "feature 'density'");
  r.features[2] = std::numeric_limits<double>::quiet_NaN();
  expect_format_error(r, "", "feature 'density'");
}

TEST(ProfileRecordCheck, FeaturesMustAllBePresentInJson) {
  std::string js = profile_record_to_json(good());
  const auto at = js.find("\"density\"");
  ASSERT_NE(at, std::string::npos);
  js.replace(at, std::string("\"density\"").size(), "\"density_x\"");  // unknown name
  EXPECT_THROW(profile_record_from_json(js), Error);
  const std::string none = [] {
    std::string j = profile_record_to_json(good());
    const auto a = j.find("\"features\":{"), b = j.find('}', a);
    return j.substr(0, a) + "\"features\":{" + j.substr(b);
  }();
  try {
    profile_record_from_json(none);
    ADD_FAILURE() << "accepted a record without features";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("lacks"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("profile-refeature"), std::string::npos) << e.message();  // says how to fix it
  }
}

void expect_set_error(const std::vector<ProfileRecord>& rs, const std::string& needle) {
  try {
    check_profile_record_set(rs);
    ADD_FAILURE() << "accepted the set; expected an error mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(e.message().find(needle), std::string::npos) << e.message();
  }
}

TEST(ProfileRecordCheck, SetChecks) {
  ProfileRecord a = good(), b = good();
  b.plan = "sm90a.mma.bf16.d64.q16d.kv16d.g1.tasc.split2.s2.w4";
  EXPECT_EQ(check_profile_record_set({a, b}), 2);
  expect_set_error({a, b, a}, "record 3");  // the same (case, plan) twice
  ProfileRecord c = b;
  c.features[0] = 99;
  expect_set_error({a, c}, "other features");
  a.role = "default";
  c = b;
  c.role = "default";
  ProfileRecord other = good();
  other.case_id = "F/s0/1";
  other.role = "default";
  EXPECT_NO_THROW(check_profile_record_set({a, other}));  // the same default plan on two cases
  expect_set_error({a, c}, "two default plans");
  ProfileRecord e = good();
  e.split = "eval";
  expect_set_error({e}, "no record of the profiling split");
}

// A file mixing records of an older schema (a feature absent, read as 0) with re-featured ones: with the presence
// flags only the features both records carry are compared (what profile-refeature needs); a carried feature that
// differs is still an error.
TEST(ProfileRecordCheck, SetChecksCompareOnlyCarriedFeatures) {
  ProfileRecord old_rec = good(), new_rec = good();
  new_rec.plan = "sm90a.mma.bf16.d64.q16d.kv16d.g1.tasc.split2.s2.w4";
  constexpr std::size_t kLast = kFeatureCount - 1;
  old_rec.features[kLast] = 0;  // not in the old record's JSON
  new_rec.features[kLast] = 1.25;
  FeaturePresence all{}, lacking{};
  all.fill(true);
  lacking.fill(true);
  lacking[kLast] = false;
  const std::vector<FeaturePresence> present{lacking, all};
  EXPECT_EQ(check_profile_record_set({old_rec, new_rec}, &present), 2);
  expect_set_error({old_rec, new_rec}, "other features");  // without presence flags every feature is compared
  new_rec.features[0] += 1;  // a feature both carry differs
  try {
    check_profile_record_set({old_rec, new_rec}, &present);
    ADD_FAILURE() << "accepted records of one case with different carried features";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("other features"), std::string::npos) << e.message();
  }
}

TEST(ProfileRecordCheck, KnownArchitectures) {
  for (const char* a : {"sm80", "sm86", "sm89", "sm90a", "sm120"}) EXPECT_TRUE(is_known_arch(a)) << a;
  for (const char* a : {"", "sm90", "SM90A", "sm100", "bogus"}) EXPECT_FALSE(is_known_arch(a)) << a;
}

}  // namespace
}  // namespace tessera
