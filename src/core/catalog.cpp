#include "core/catalog.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>

#include "core/arch_limits.hpp"
#include "kernels/mma/config.cuh"    // plain C++: the shared-memory layout of the Mma kernels
#include "kernels/wgmma/config.cuh"  // ... and of the Wgmma kernels

namespace tessera {

namespace {

/// The Config an entry's kernels are compiled with, for its dynamic shared memory and whether it runs persistent CTAs
/// (element type: any 2-byte type; the layout depends only on D, tiles, warps and stages).
template <KernelFamily F, int D, int TQ, int TKV, int W, int S>
using EntryConfig = std::conditional_t<F == KernelFamily::kMma, kernels::mma::Config<std::uint16_t, D, TQ, TKV, W, S>,
                                       kernels::wgmma::Config<std::uint16_t, D, TQ, TKV, W, S>>;

#define TESSERA_CATALOG_ENTRY(name, family, dtype, head_dim, tile_q, tile_kv, warps, stages)                      \
  CatalogEntry{name,                                                                                             \
               KernelFamily::k##family,                                                                          \
               DType::k##dtype,                                                                                  \
               head_dim,                                                                                         \
               tile_q,                                                                                           \
               tile_kv,                                                                                          \
               warps,                                                                                            \
               stages,                                                                                           \
               EntryConfig<KernelFamily::k##family, head_dim, tile_q, tile_kv, warps, stages>::kSmemBytes,      \
               EntryConfig<KernelFamily::k##family, head_dim, tile_q, tile_kv, warps, stages>::kPersistent},
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

std::string_view catalog_version() {
  static const std::string version = [] {
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&h](std::string_view text) {
      for (unsigned char c : text) {
        h ^= c;
        h *= 1099511628211ull;
      }
      h ^= 0xff;  // field separator
      h *= 1099511628211ull;
    };
    for (const auto& e : kCatalog) {
      mix(e.name);
      mix(std::to_string(static_cast<int>(e.family)) + "," + std::to_string(static_cast<int>(e.dtype)) + "," +
          std::to_string(e.head_dim) + "," + std::to_string(e.tile_q) + "," + std::to_string(e.tile_kv) + "," +
          std::to_string(e.warps) + "," + std::to_string(e.stages));
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "cat-%016llx", static_cast<unsigned long long>(h));
    return std::string(buf);
  }();
  return version;
}

std::span<const Arch> family_architectures(KernelFamily family) noexcept {
  if (family == KernelFamily::kWgmma) return kWgmmaArchs;
  return kMmaArchs;
}

bool family_targets(KernelFamily family, Arch arch) noexcept {
  auto archs = family_architectures(family);
  return std::find(archs.begin(), archs.end(), arch) != archs.end();
}

bool entry_fits_smem(const CatalogEntry& entry, Arch arch) noexcept {
  return entry.smem_bytes <= max_dynamic_smem_bytes(arch);
}

bool entry_targets(const CatalogEntry& entry, Arch arch) noexcept {
  return family_targets(entry.family, arch) && entry_fits_smem(entry, arch);
}

std::vector<Arch> entry_architectures(const CatalogEntry& entry) {
  std::vector<Arch> out;
  for (Arch a : family_architectures(entry.family))
    if (entry_fits_smem(entry, a)) out.push_back(a);
  return out;
}

}  // namespace tessera
