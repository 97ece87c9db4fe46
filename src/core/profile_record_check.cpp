#include "core/profile_record_check.hpp"

#include <fmt/core.h>

#include <charconv>
#include <cmath>
#include <map>
#include <utility>

#include "core/features.hpp"
#include "core/plan.hpp"
#include "tessera/error.hpp"

namespace tessera {

ProfileCaseId parse_profile_case_id(std::string_view id) {
  const std::string_view full = id;
  auto bad = [&](const std::string& why) {
    throw Error(ErrorCode::kFormatError, "case", fmt::format("case id '{}' {}", full, why));
  };
  ProfileCaseId c;
  if (id.size() > kWholeRequestSuffix.size() && id.substr(id.size() - kWholeRequestSuffix.size()) == kWholeRequestSuffix) {
    c.whole_request = true;
    id = id.substr(0, id.size() - kWholeRequestSuffix.size());
  }
  const std::size_t a = id.find('/'), b = id.rfind('/');
  if (a == std::string_view::npos || a == b || a == 0 || b == a + 1 || b + 1 == id.size())
    bad("is not \"<family>/<source>/<index>\" or \"<family>/<source>/<index>/whole\" (as `tessera profile` writes it)");
  c.family = std::string(id.substr(0, a));
  c.source = std::string(id.substr(a + 1, b - a - 1));
  const std::string_view index = id.substr(b + 1);
  const auto [end, ec] = std::from_chars(index.data(), index.data() + index.size(), c.index);
  const bool digits_only = index.find_first_not_of("0123456789") == std::string_view::npos;
  if (!digits_only || ec != std::errc() || end != index.data() + index.size() || (index.size() > 1 && index[0] == '0'))
    bad(fmt::format("has index '{}', which is not a canonical decimal integer (digits only: no sign, no leading "
                    "zeros, at most 2147483647)",
                    index));
  return c;
}

bool is_known_arch(std::string_view arch) noexcept { return arch_from_name(arch).has_value(); }

void check_profile_record(const ProfileRecord& r, std::string_view arch) {
  auto bad = [](const std::string& msg) { throw Error(ErrorCode::kFormatError, "profile", msg); };
  ProfileCaseId id;
  try {
    id = parse_profile_case_id(r.case_id);
  } catch (const Error& e) {
    bad(fmt::format("field 'case': {}", e.message()));
  }
  if (id.source != r.source)
    bad(fmt::format("field 'source' '{}' differs from the source '{}' of case '{}'", r.source, id.source, r.case_id));
  if (!(r.latency_us > 0) || !std::isfinite(r.latency_us))
    bad(fmt::format("field 'latency_us' must be > 0 and finite, got {}", r.latency_us));
  if (r.split != "profile" && r.split != "eval")
    bad(fmt::format("field 'split' must be \"profile\" or \"eval\", got \"{}\"", r.split));
  if (!r.role.empty() && r.role != "default" && r.role != "direct" && r.role != "default,direct")
    bad(fmt::format("field 'role' must be \"default\", \"direct\" or \"default,direct\" when present, got \"{}\"",
                    r.role));
  for (int f = 0; f < kFeatureCount; ++f)
    if (!(r.features[f] >= 0) || !std::isfinite(r.features[f]))
      bad(fmt::format("feature '{}' must be >= 0 and finite, got {}", feature_name(static_cast<Feature>(f)),
                      r.features[f]));
  Plan p;
  try {
    p = parse_plan_id(r.plan);
  } catch (const Error& e) {
    bad(fmt::format("field 'plan' '{}' is not a plan id: {}", r.plan, e.message()));
  }
  const RequestKey k = plan_request_key(p);
  if (k.str() != r.key) bad(fmt::format("field 'key' '{}' does not match plan '{}' (its key is '{}')", r.key, r.plan, k.str()));
  if (!arch.empty() && k.arch != arch)
    bad(fmt::format("record arch '{}' (key '{}') differs from --arch '{}'", k.arch, r.key, arch));
}

int check_profile_record_set(const std::vector<ProfileRecord>& records, const std::vector<FeaturePresence>* present,
                             bool need_profiling) {
  auto bad = [](std::size_t i, const std::string& msg) -> int {
    throw Error(ErrorCode::kFormatError, "profile", fmt::format("record {}: {}", i + 1, msg));
  };
  std::map<std::pair<std::string, std::string>, std::size_t> case_plan;  // (case, plan) -> first record
  std::map<std::string, std::size_t> first_of_case;
  std::map<std::string, std::pair<std::string, std::size_t>> default_of_key;  // key -> (plan, record)
  int profiling = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const ProfileRecord& r = records[i];
    profiling += r.split == "profile";
    if (auto [it, fresh] = case_plan.emplace(std::make_pair(r.case_id, r.plan), i); !fresh)
      bad(i, fmt::format("case '{}' and plan '{}' were already recorded by record {}", r.case_id, r.plan, it->second + 1));
    if (auto [it, fresh] = first_of_case.emplace(r.case_id, i); !fresh) {
      const ProfileRecord& f = records[it->second];
      bool same_features = true;
      for (std::size_t k = 0; k < r.features.size(); ++k) {
        const bool both = !present || ((*present)[it->second][k] && (*present)[i][k]);
        if (both && f.features[k] != r.features[k]) same_features = false;
      }
      if (!same_features || f.key != r.key || f.source != r.source || f.split != r.split || f.request != r.request)
        bad(i, fmt::format("case '{}' has other features, key, source, request or split than record {}", r.case_id,
                           it->second + 1));
    }
    if (r.role == "default" || r.role == "default,direct") {
      if (auto [it, fresh] = default_of_key.emplace(r.key, std::make_pair(r.plan, i)); !fresh && it->second.first != r.plan)
        bad(i, fmt::format("key '{}' has two default plans: '{}' (record {}) and '{}'", r.key, it->second.first,
                           it->second.second + 1, r.plan));
    }
  }
  if (profiling == 0 && need_profiling)
    throw Error(ErrorCode::kFormatError, "profile",
                "no record of the profiling split (\"split\": \"profile\"): there is nothing to compile a table from");
  return profiling;
}

}  // namespace tessera
