#pragma once
/// @file plan_table_file.hpp
/// User plan tables: a plan-table artifact (docs/selection.md) read from a file instead of the table embedded for a
/// GPU, e.g. one compiled with `tessera compile-table` from `tessera profile --masks` records of the user's GPU and
/// sparsifier. Used by RuntimeOptions::plan_table_path, CpuRunOptions::plan_table_path and tessera.load_plan_table.
#include <string>

namespace tessera {

/// What a checked plan-table file holds.
struct PlanTableFileInfo {
  std::string path;             ///< the file, as given
  std::string arch;             ///< architecture it was profiled on, e.g. "sm90a"
  std::string catalog_version;  ///< equals this build's catalog_version()
  std::string gpu_name;         ///< free text, e.g. "NVIDIA H200" ("" when the file has none)
  int keys = 0;                 ///< request keys with a tree
  /// "table from <path> (<catalog version>, <keys> keys)": DispatchInfo::table_status and Runtime::table_status().
  std::string status;
};

/// Reads `path` and checks it as strictly as the embedded table (plan_table_from_json against this build's
/// catalog_version(): format name, format_version, catalog version, a known arch, feature schema, trees, rankings);
/// when `arch` is non-empty, the table must also have been profiled for `arch`. Never falls back: errors name
/// "plan_table_path" and the file: Error(kIoError) when `path` is empty, missing, unreadable or a directory;
/// Error(kFormatError) with the reason ("'t.json': catalog_version 'x' does not match ...", "'t.json': table for
/// sm80, this GPU is sm90a") when the file is not a table this build can use.
PlanTableFileInfo check_plan_table_file(const std::string& path, const std::string& arch = "");

}  // namespace tessera
