#include "core/profile_record_check.hpp"

#include <fmt/core.h>

#include <cmath>

#include "core/features.hpp"
#include "core/plan.hpp"
#include "tessera/error.hpp"

namespace tessera {

bool is_known_arch(std::string_view arch) noexcept { return arch_from_name(arch).has_value(); }

void check_profile_record(const ProfileRecord& r, std::string_view arch) {
  auto bad = [](const std::string& msg) { throw Error(ErrorCode::kFormatError, "profile", msg); };
  if (!(r.latency_us > 0) || !std::isfinite(r.latency_us))
    bad(fmt::format("field 'latency_us' must be > 0 and finite, got {}", r.latency_us));
  if (r.split != "profile" && r.split != "eval")
    bad(fmt::format("field 'split' must be \"profile\" or \"eval\", got \"{}\"", r.split));
  if (!r.role.empty() && r.role != "default" && r.role != "direct" && r.role != "default,direct")
    bad(fmt::format("field 'role' must be \"default\", \"direct\" or \"default,direct\" when present, got \"{}\"",
                    r.role));
  Plan p;
  try {
    p = parse_plan_id(r.plan);
  } catch (const Error& e) {
    bad(fmt::format("field 'plan' '{}' is not a plan id: {}", r.plan, e.message()));
  }
  const RequestKey k{std::string(arch_name(p.arch)), p.dtype, p.head_dim, p.block_q, p.block_kv};
  if (k.str() != r.key) bad(fmt::format("field 'key' '{}' does not match plan '{}' (its key is '{}')", r.key, r.plan, k.str()));
  if (!arch.empty() && k.arch != arch)
    bad(fmt::format("record arch '{}' (key '{}') differs from --arch '{}'", k.arch, r.key, arch));
}

}  // namespace tessera
