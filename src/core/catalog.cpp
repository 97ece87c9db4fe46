#include "core/catalog.hpp"

#include <algorithm>
#include <array>

namespace tessera {

namespace {

#define TESSERA_CATALOG_ENTRY(name, family, dtype, head_dim, tile_q, tile_kv, warps, stages) \
  CatalogEntry{name, KernelFamily::k##family, DType::k##dtype, head_dim, tile_q, tile_kv, warps, stages},
constexpr CatalogEntry kCatalog[] = {
#include "kernels/catalog.def"
};
#undef TESSERA_CATALOG_ENTRY

constexpr std::array<Arch, 5> kMmaArchs{Arch::kSm80, Arch::kSm86, Arch::kSm89, Arch::kSm90a, Arch::kSm120};
constexpr std::array<Arch, 1> kWgmmaArchs{Arch::kSm90a};

}  // namespace

std::span<const CatalogEntry> catalog() { return kCatalog; }

const CatalogEntry* find_catalog_entry(std::string_view name, std::span<const CatalogEntry> entries) {
  for (const auto& e : entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

const CatalogEntry* find_plan_entry(const Plan& p, std::span<const CatalogEntry> entries) {
  for (const auto& e : entries) {
    if (e.family == p.family && e.dtype == p.dtype && e.head_dim == p.head_dim && e.tile_q == p.tile_q() &&
        e.tile_kv == p.tile_kv() && e.warps == p.warps && e.stages == p.org.stages)
      return &e;
  }
  return nullptr;
}

std::span<const Arch> family_architectures(KernelFamily family) noexcept {
  if (family == KernelFamily::kWgmma) return kWgmmaArchs;
  return kMmaArchs;
}

bool family_targets(KernelFamily family, Arch arch) noexcept {
  auto archs = family_architectures(family);
  return std::find(archs.begin(), archs.end(), arch) != archs.end();
}

}  // namespace tessera
