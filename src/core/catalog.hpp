#pragma once
// The host kernel catalog, built from the catalog spec src/kernels/catalog.def (DESIGN.md section 4).
#include <span>
#include <string_view>
#include <vector>

#include "core/catalog_entry.hpp"
#include "core/plan.hpp"

namespace tessera {

/// Every entry of src/kernels/catalog.def, in table order (whether or not this build compiled its kernel).
std::span<const CatalogEntry> catalog();

/// The entry named `name`, or nullptr.
const CatalogEntry* find_catalog_entry(std::string_view name, std::span<const CatalogEntry> entries = catalog());

/// The entry a plan runs on (same family, dtype, head_dim, tile T_Q x T_KV, warps, stages), or nullptr.
const CatalogEntry* find_plan_entry(const Plan& plan, std::span<const CatalogEntry> entries = catalog());

/// Architectures a kernel family is built for: Mma -> sm80, sm86, sm89, sm90a, sm120; Wgmma -> sm90a.
std::span<const Arch> family_architectures(KernelFamily family) noexcept;

/// Version of the catalog spec: "cat-" + 16 hex digits of an FNV-1a hash over every entry's fields. A plan
/// table profiled against another catalog is rejected (its plan ids may name kernels that changed).
std::string_view catalog_version();

/// Whether `family` targets `arch`.
bool family_targets(KernelFamily family, Arch arch) noexcept;

}  // namespace tessera
