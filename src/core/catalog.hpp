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

/// Whether the entry's dynamic shared memory (CatalogEntry::smem_bytes) is within `arch`'s opt-in limit
/// (max_dynamic_smem_bytes, src/core/arch_limits.hpp), i.e. whether the kernel can launch there at all.
bool entry_fits_smem(const CatalogEntry& entry, Arch arch) noexcept;

/// Whether the entry can run on `arch`: its family targets the arch and it fits the arch's shared memory.
/// E.g. mma.bf16.d128.t128x128.w8.s2 (163,968 B) runs on sm80 and sm90a but not on sm86, sm89 or sm120 (99 KB).
bool entry_targets(const CatalogEntry& entry, Arch arch) noexcept;

/// The architectures entry_targets() accepts for `entry`, in family_architectures() order.
std::vector<Arch> entry_architectures(const CatalogEntry& entry);

}  // namespace tessera
