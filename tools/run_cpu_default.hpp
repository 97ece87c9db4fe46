#pragma once
// `tessera run` without a GPU: the float64 CPU plan executor on a scaled-down default (the first evaluation case
// of every family, cropped to about 768 query and key tokens and at most 2 heads), checked against the float64
// reference. Returns the process exit code.
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::tools {

/// `plan_table`: a user plan table for the sm90a selection ("" = the embedded one), checked by the caller.
int run_cpu_default(const std::vector<std::string>& families, const std::string& json_path, std::uint64_t seed,
                    const std::string& plan_table = "");

}  // namespace tessera::tools
