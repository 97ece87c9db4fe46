// Checks on profile records before `tessera compile-table` uses them (docs/selection.md, "Profile records").
#pragma once

#include <string_view>
#include <vector>

#include "core/table_compiler.hpp"

namespace tessera {

/// True when `arch` is the plan-id spelling of a known architecture ("sm80", "sm86", "sm89", "sm90a", "sm120").
bool is_known_arch(std::string_view arch) noexcept;

/// Checks one parsed record: latency_us > 0 and finite; split "profile" or "eval"; role "", "default" or "direct";
/// the plan id parses (parse_plan_id) and agrees with the key (RequestKey::str() of the plan's arch, dtype, head_dim,
/// B_Q, B_KV: "<arch>.<dtype>.d<D>.q<B_Q>.kv<B_KV>"); when `arch` is not empty, the key's arch equals it.
/// Throws Error(kFormatError, "profile", message naming the field).
void check_profile_record(const ProfileRecord& r, std::string_view arch);

/// Checks a whole set of records (records already passed check_profile_record one by one): no (case, plan) pair
/// twice; every record of a case has the same features, key, source, request and split; at most one default plan
/// per key; at least one record of the profiling split. Returns the number of profiling-split records. Throws
/// Error(kFormatError, "profile", "record <n>: ...") naming the 1-based position of the offending record.
int check_profile_record_set(const std::vector<ProfileRecord>& records);

}  // namespace tessera
