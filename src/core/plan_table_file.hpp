#pragma once
// Plan tables as the runtimes (Runtime, run_cpu) load them: user files (include/tessera/plan_table_file.hpp, strict) and
// the embedded table of an arch (the documented fallback to default plans), with the status string both report.
#include <optional>
#include <string>

#include "core/plan_table.hpp"
#include "tessera/plan_table_file.hpp"

namespace tessera {

/// The table of `path`, checked as check_plan_table_file(path, arch) documents (same errors); `info`, when given,
/// receives its summary.
PlanTable read_plan_table_file(const std::string& path, const std::string& arch, PlanTableFileInfo* info = nullptr);

/// The embedded table of `arch` and the status the runtimes report (DispatchInfo::table_status): "embedded table for
/// <arch> (<catalog version>, <keys> keys)"; table nullopt with "no plan table embedded for <arch>: documented default
/// plans" or "embedded table for <arch> rejected, documented default plans used: <reason>" (the documented fallback).
struct EmbeddedTableLoad {
  std::optional<PlanTable> table;
  std::string status;
};
EmbeddedTableLoad load_embedded_plan_table(const std::string& arch);

}  // namespace tessera
