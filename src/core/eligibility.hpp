#pragma once
// Eligible(P, R): whether a plan can serve a request (DESIGN.md section 4). A pure host function of the plan,
// the catalog entry it runs on and the request's features; no GPU, no global state.
#include <cstdint>
#include <string>

#include "core/catalog_entry.hpp"
#include "core/plan.hpp"
#include "tessera/mask.hpp"

namespace tessera {

/// The request features eligibility looks at.
struct EligibilityRequest {
  Arch arch = Arch::kSm90a;                 ///< architecture of the GPU that runs the request
  DType dtype = DType::kBFloat16;           ///< Q/K/V dtype
  int head_dim = 128;                       ///< D
  int block_q = 64;                         ///< B_Q, tokens
  int block_kv = 64;                        ///< B_KV, tokens
  MaskFormat mask_format = MaskFormat::kDense;
  std::int64_t query_tiles = 0;             ///< B * H_q * ceil(N_q / T_Q) of the plan, for the workspace bound;
                                            ///< 0 = do not check the workspace
  std::int64_t max_workspace_bytes = -1;    ///< split-KV workspace limit in bytes; -1 = unlimited
  bool operator==(const EligibilityRequest&) const = default;
};

/// Result of an eligibility check: ok, or the first reason it fails (e.g. "tile_q: plan T_Q = 128 != entry 64").
struct Eligibility {
  bool ok = false;
  std::string reason;
  explicit operator bool() const noexcept { return ok; }
};

/// Split-KV workspace bytes of a plan for `query_tiles` query tiles: every query tile may get `split` partial
/// slots of fp32 O [T_Q, D] and fp32 LSE [T_Q]. 0 when split == 1.
std::int64_t split_workspace_bytes_bound(const Plan& plan, std::int64_t query_tiles) noexcept;

/// Eligible(P, R) for the catalog entry `entry` that is to run the plan. Checks, in order: the plan is well formed;
/// the entry's family targets R.arch and matches the plan's; the entry's dynamic shared memory fits R.arch's
/// opt-in limit (entry_fits_smem: 99 KB on sm86/sm89/sm120, 163 KB on sm80, 227 KB on sm90a); dtype, head_dim, tile (T = mapping(B) must equal the
/// entry's T_Q, T_KV), warps and stages match; R's geometry equals the plan's; Refined needs B % r == 0 and
/// B / r >= 16 (multiple of 16); Coarsened factors <= 8 (membership bits); the mask format is one mu(M) accepts;
/// the split-KV workspace fits the limit.
Eligibility eligible(const Plan& plan, const CatalogEntry& entry, const EligibilityRequest& request);

}  // namespace tessera
