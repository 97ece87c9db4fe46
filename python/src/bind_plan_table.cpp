// tessera._C.check_plan_table: reads and checks a user plan-table file (tessera.load_plan_table).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "tessera/plan_table_file.hpp"

namespace tessera::py {

namespace nb = nanobind;

void bind_plan_table(nb::module_& m) {
  m.def(
      "check_plan_table",
      [](const std::string& path, const std::string& arch) {
        const PlanTableFileInfo info = check_plan_table_file(path, arch);
        nb::dict d;
        d["path"] = info.path;
        d["arch"] = info.arch;
        d["catalog_version"] = info.catalog_version;
        d["gpu_name"] = info.gpu_name;
        d["keys"] = info.keys;
        d["status"] = info.status;
        return d;
      },
      nb::arg("path"), nb::arg("arch") = "",
      "Reads and checks the plan table at `path` against this build (and `arch` when non-empty); returns its\n"
      "summary (path, arch, catalog_version, gpu_name, keys, status). Raises the error of\n"
      "tessera::check_plan_table_file (argument 'plan_table_path'). Low-level: use tessera.load_plan_table.");
}

}  // namespace tessera::py
