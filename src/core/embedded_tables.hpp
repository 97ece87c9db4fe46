#pragma once
// Plan-table artifacts embedded in the library at build time (DESIGN.md section 6, step 3): every
// src/core/plan_tables/<arch>.json becomes a string in the binary. The runtime loads the one for the GPU it
// runs on; an architecture without one falls back to the documented default plans.
#include <string_view>
#include <vector>

namespace tessera {

/// One embedded artifact: the architecture it was profiled on ("sm90a", ...) and its JSON text.
struct EmbeddedPlanTable {
  std::string_view arch;
  std::string_view json;
};

/// All embedded artifacts (possibly none).
const std::vector<EmbeddedPlanTable>& embedded_plan_tables();

/// The embedded artifact for `arch`, or an empty string_view when none was embedded.
std::string_view embedded_plan_table(std::string_view arch);

}  // namespace tessera
