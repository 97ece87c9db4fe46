#include "core/json_number.hpp"

#include <fmt/core.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "tessera/error.hpp"

namespace tessera {

std::int64_t json_integer(const nlohmann::json& v, const std::string& argument, const std::string& field,
                          std::int64_t lo, std::int64_t hi) {
  bool ok = false;
  std::int64_t x = 0;
  if (v.is_number_unsigned()) {  // may exceed int64: compare as unsigned first
    const std::uint64_t u = v.get<std::uint64_t>();
    ok = hi >= 0 && u <= static_cast<std::uint64_t>(hi);
    x = ok ? static_cast<std::int64_t>(u) : 0;
  } else if (v.is_number_integer()) {
    x = v.get<std::int64_t>();
    ok = true;
  }
  if (!ok || x < lo || x > hi)
    throw Error(ErrorCode::kFormatError, argument,
                fmt::format("{} is {}, not an integer in [{}, {}]", field, v.dump(), lo, hi));
  return x;
}

double json_number(const nlohmann::json& v, const std::string& argument, const std::string& field) {
  if (!v.is_number() || !std::isfinite(v.get<double>()))
    throw Error(ErrorCode::kFormatError, argument, fmt::format("{} is {}, not a finite number", field, v.dump()));
  return v.get<double>();
}

}  // namespace tessera
