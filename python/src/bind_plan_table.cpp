// tessera._C.check_plan_table: reads and checks a user plan-table file (tessera.load_plan_table).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <utility>

#include "tessera/plan_table_file.hpp"

namespace tessera::py {

namespace nb = nanobind;

void bind_plan_table(nb::module_& m) {
  m.def(
      "check_plan_table",
      [](const std::string& path, const std::string& arch) {
        const PlanTableFileInfo info = check_plan_table_file(path, arch);
        nb::dict d;
        const std::pair<const char*, const std::string*> strings[] = {
            {"path", &info.path}, {"arch", &info.arch}, {"catalog_version", &info.catalog_version},
            {"gpu_name", &info.gpu_name}, {"status", &info.status}};
        for (const auto& [name, value] : strings) d[name] = *value;
        d["keys"] = info.keys;
        return d;
      },
      nb::arg("path"), nb::arg("arch") = "",
      "Reads and checks the plan table at `path` against this build (and `arch` when non-empty); returns its\n"
      "summary (path, arch, catalog_version, gpu_name, keys, status). Raises the error of\n"
      "tessera::check_plan_table_file (argument 'plan_table_path'). Low-level: use tessera.load_plan_table.");
}

}  // namespace tessera::py
