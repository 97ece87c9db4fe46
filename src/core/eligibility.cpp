#include "core/eligibility.hpp"

#include <fmt/core.h>

#include "core/arch_limits.hpp"
#include "core/catalog.hpp"
#include "tessera/error.hpp"

namespace tessera {

std::int64_t split_workspace_bytes_bound(const Plan& plan, std::int64_t query_tiles) noexcept {
  if (plan.org.split <= 1 || query_tiles <= 0) return 0;
  const std::int64_t per_slot = static_cast<std::int64_t>(plan.tile_q()) * (plan.head_dim + 1) * 4;
  return query_tiles * plan.org.split * per_slot;
}

Eligibility eligible(const Plan& p, const CatalogEntry& e, const EligibilityRequest& r) {
  auto no = [](std::string why) { return Eligibility{false, std::move(why)}; };
  try {
    check_plan(p);
  } catch (const Error& err) {
    return no(err.argument() + ": " + err.message());
  }
  if (p.arch != r.arch) return no(fmt::format("arch: plan {} != request {}", arch_name(p.arch), arch_name(r.arch)));
  if (e.family != p.family)
    return no(fmt::format("family: plan {} != entry {}", family_name(p.family), family_name(e.family)));
  if (!family_targets(e.family, r.arch))
    return no(fmt::format("arch: family {} is not built for {}", family_name(e.family), arch_name(r.arch)));
  if (!entry_fits_smem(e, r.arch))
    return no(fmt::format("smem: entry {} needs {} bytes of dynamic shared memory > {} limit {}", e.name,
                          e.smem_bytes, arch_name(r.arch), max_dynamic_smem_bytes(r.arch)));
  if (p.dtype != r.dtype || e.dtype != r.dtype)
    return no(fmt::format("dtype: request {}, plan {}, entry {}", dtype_name(r.dtype), dtype_name(p.dtype),
                          dtype_name(e.dtype)));
  if (p.head_dim != r.head_dim || e.head_dim != r.head_dim)
    return no(fmt::format("head_dim: request {}, plan {}, entry {}", r.head_dim, p.head_dim, e.head_dim));
  if (p.block_q != r.block_q) return no(fmt::format("block_q: plan B_Q = {} != request {}", p.block_q, r.block_q));
  if (p.block_kv != r.block_kv)
    return no(fmt::format("block_kv: plan B_KV = {} != request {}", p.block_kv, r.block_kv));
  if (p.tile_q() != e.tile_q) return no(fmt::format("tile_q: plan T_Q = {} != entry {}", p.tile_q(), e.tile_q));
  if (p.tile_kv() != e.tile_kv) return no(fmt::format("tile_kv: plan T_KV = {} != entry {}", p.tile_kv(), e.tile_kv));
  if (p.warps != e.warps) return no(fmt::format("warps: plan {} != entry {}", p.warps, e.warps));
  if (p.org.stages != e.stages) return no(fmt::format("stages: plan {} != entry {}", p.org.stages, e.stages));
  if (r.mask_format != MaskFormat::kDense && r.mask_format != MaskFormat::kBlockCsr &&
      r.mask_format != MaskFormat::kIndexLists)
    return no("mask_format: unknown mask format");
  if (r.max_workspace_bytes >= 0 && r.query_tiles > 0) {
    const std::int64_t ws = split_workspace_bytes_bound(p, r.query_tiles);
    if (ws > r.max_workspace_bytes)
      return no(fmt::format("workspace: split-KV needs up to {} bytes > limit {}", ws, r.max_workspace_bytes));
  }
  return Eligibility{true, {}};
}

}  // namespace tessera
