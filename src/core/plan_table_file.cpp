// User plan-table files: read, checked as strictly as the embedded table, errors naming the file.
#include "core/plan_table_file.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/catalog.hpp"
#include "core/embedded_tables.hpp"
#include "tessera/error.hpp"

namespace tessera {

namespace {
constexpr const char* kArgument = "plan_table_path";

std::string read_text(const std::string& path) {
  if (path.empty()) throw Error(ErrorCode::kIoError, kArgument, "the plan-table path is empty");
  std::error_code ec;  // a directory opens as an ifstream on Linux and reads as nothing: say what it is
  if (std::filesystem::is_directory(path, ec)) throw Error(ErrorCode::kIoError, kArgument, "'" + path + "' is a directory");
  if (!std::filesystem::exists(path, ec))
    throw Error(ErrorCode::kIoError, kArgument, "cannot read '" + path + "': no such file");
  std::ifstream in(path);
  if (!in) throw Error(ErrorCode::kIoError, kArgument, "cannot read '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(ErrorCode::kIoError, kArgument, "error reading '" + path + "'");
  return ss.str();
}

/// "(<catalog version>, <keys> keys)" of a loaded table.
std::string table_summary(const PlanTable& t) {
  return "(" + t.catalog_version + ", " + std::to_string(t.trees.size()) + " keys)";
}
}  // namespace

PlanTable read_plan_table_file(const std::string& path, const std::string& arch, PlanTableFileInfo* info) {
  const std::string text = read_text(path);
  PlanTable t;
  try {
    t = arch.empty() ? plan_table_from_json(text, std::string(catalog_version()))
                     : plan_table_for_arch(text, arch, std::string(catalog_version()));
  } catch (const Error& e) {
    throw Error(ErrorCode::kFormatError, kArgument, "'" + path + "' is not a usable plan table: " + e.message());
  }
  if (info) {
    info->path = path;
    info->arch = t.arch;
    info->catalog_version = t.catalog_version;
    info->gpu_name = t.gpu_name;
    info->keys = static_cast<int>(t.trees.size());
    info->status = "table from " + path + " " + table_summary(t);
  }
  return t;
}

EmbeddedTableLoad load_embedded_plan_table(const std::string& arch) {
  EmbeddedTableLoad out;
  const std::string_view text = embedded_plan_table(arch);
  const std::string origin = "embedded table for " + arch;
  if (text.empty()) {
    out.status = "no plan table embedded for " + arch + ": documented default plans";
    return out;
  }
  try {
    out.table = plan_table_for_arch(std::string(text), arch, std::string(catalog_version()));
    out.status = origin + " " + table_summary(*out.table);
  } catch (const Error& e) {
    out.status = origin + " rejected, documented default plans used: " + e.message();
  }
  return out;
}

PlanTableFileInfo check_plan_table_file(const std::string& path, const std::string& arch) {
  PlanTableFileInfo info;
  read_plan_table_file(path, arch, &info);
  return info;
}

}  // namespace tessera
