// Checks on profile records before `tessera compile-table` uses them (docs/selection.md, "Profile records").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/table_compiler.hpp"

namespace tessera {

/// A profile case id as `tessera profile` writes it: "<family>/<source>/<index>".
struct ProfileCaseId {
  std::string family;
  std::string source;  ///< may itself contain '/': everything between the first and the last '/'
  int index = 0;
  /// The id ends in "/whole": the whole request of case `index` (every head of the model's layer; corpus
  /// make_whole_request), not the stored case.
  bool whole_request = false;
};

/// The suffix of a whole request's case id: "<family>/<source>/<index>/whole".
inline constexpr std::string_view kWholeRequestSuffix = "/whole";

/// Parses "<family>/<source>/<index>" or "<family>/<source>/<index>/whole" (the whole request of that case): family
/// and source non-empty, index in canonical decimal (digits only, no sign, no leading zeros, fits an int), so
/// "STA-real/x/021" is rejected. Throws Error(kFormatError, "case", message naming
/// the id), e.g. "case id 'STA-real/x/021': index '021' is not a canonical decimal integer (no sign, no leading
/// zeros, at most 2147483647)".
ProfileCaseId parse_profile_case_id(std::string_view id);

/// True when `arch` is the plan-id spelling of a known architecture ("sm80", "sm86", "sm89", "sm90a", "sm120").
bool is_known_arch(std::string_view arch) noexcept;

/// Checks one parsed record: the case id parses (parse_profile_case_id) and its source component equals the record's
/// `source`; latency_us > 0 and finite; split "profile" or "eval"; role "", "default" or "direct";
/// the plan id parses (parse_plan_id) and agrees with the key (RequestKey::str() of the plan's arch, dtype, head_dim,
/// B_Q, B_KV: "<arch>.<dtype>.d<D>.q<B_Q>.kv<B_KV>"); when `arch` is not empty, the key's arch equals it.
/// Throws Error(kFormatError, "profile", message naming the field).
void check_profile_record(const ProfileRecord& r, std::string_view arch);

/// Checks a whole set of records (records already passed check_profile_record one by one): no (case, plan) pair
/// twice; every record of a case has the same features, key, source, request and split; at most one default plan
/// per key; at least one record of the profiling split. Returns the number of profiling-split records. Throws
/// Error(kFormatError, "profile", "record <n>: ...") naming the 1-based position of the offending record.
/// `present` (optional, one entry per record, from profile_record_from_json): which features each record carried;
/// two records of a case then agree on the features both carry, so a file that mixes records of an older schema
/// with re-featured ones can be re-featured (`tessera profile-refeature`). Without it every feature is compared.
/// `need_profiling` false: a set without profiling-split records is accepted (re-featuring compiles nothing).
int check_profile_record_set(const std::vector<ProfileRecord>& records,
                             const std::vector<FeaturePresence>* present = nullptr, bool need_profiling = true);

}  // namespace tessera
