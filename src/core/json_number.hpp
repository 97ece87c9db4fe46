#pragma once
// Strict reading of JSON numbers from artifacts and input files. nlohmann's get<int>() wraps an out-of-range
// integer (4294967297 reads as 1), truncates a float (1.9 reads as 1) and get<double>() converts a boolean
// (true reads as 1): a corrupt file would be read as another, valid-looking one. These readers accept only the
// JSON type asked for, in range, and otherwise throw an error naming the argument and the field.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace tessera {

/// `v` as an integer in [lo, hi] (lo <= hi). Accepts only a JSON integer (signed or unsigned): a float (even 1.0),
/// a boolean, a string or null is rejected. Throws tessera::Error(kFormatError, argument,
/// "<field> is <v as JSON>, not an integer in [lo, hi]") otherwise; `field` says where the value is (e.g.
/// "tree 'k' node 3 field 'leaf'").
std::int64_t json_integer(const nlohmann::json& v, const std::string& argument, const std::string& field,
                          std::int64_t lo, std::int64_t hi);

/// `v` as a finite double. Accepts only a JSON number (integer or float; a boolean, string or null is rejected).
/// Throws tessera::Error(kFormatError, argument, "<field> is <v as JSON>, not a finite number") otherwise.
double json_number(const nlohmann::json& v, const std::string& argument, const std::string& field);

}  // namespace tessera
