#pragma once
// The --seed option of the CLI commands, parsed strictly (CLI11's unsigned conversion wraps -1 and saturates values
// past 2^64 - 1 silently).
#include <fmt/core.h>

#include <charconv>
#include <cstdint>
#include <string>
#include <system_error>

#include "tessera/error.hpp"

namespace tessera::tools {

/// Parses a seed given on the command line: a decimal integer in 0 .. 2^64 - 1, nothing else (no sign, no
/// saturation of larger values). Throws Error(kInvalidArgument, option).
inline std::uint64_t parse_seed(const std::string& text, const char* option) {
  std::uint64_t v = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  const auto [p, ec] = std::from_chars(b, e, v);
  if (text.empty() || ec != std::errc() || p != e)
    throw Error(ErrorCode::kInvalidArgument, option,
                fmt::format("'{}' is not an integer in 0 .. 18446744073709551615", text));
  return v;
}

}  // namespace tessera::tools
