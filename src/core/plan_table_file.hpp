#pragma once
// Reading user plan-table files (include/tessera/plan_table_file.hpp): the parsed table for the runtimes.
#include <string>

#include "core/plan_table.hpp"
#include "tessera/plan_table_file.hpp"

namespace tessera {

/// The table of `path`, checked as check_plan_table_file(path, arch) documents (same errors); `info`, when given,
/// receives its summary.
PlanTable read_plan_table_file(const std::string& path, const std::string& arch, PlanTableFileInfo* info = nullptr);

}  // namespace tessera
