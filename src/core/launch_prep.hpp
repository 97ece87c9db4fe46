#pragma once
// Launch preparation on the host (DESIGN.md section 5): the CPU twins of the GPU metadata builders, the prepared
// metadata in host memory, and workspace sizing. The rules of what each builder produces are in
// core/launch_prep_rules.hpp; docs/plans.md describes the layout.
#include <cstdint>
#include <vector>

#include "core/launch_prep_rules.hpp"
#include "core/plan.hpp"
#include "core/tile_metadata.hpp"
#include "tessera/mask_state.hpp"

namespace tessera {

/// Problem sizes launch preparation needs (tokens and heads of the request).
struct PrepProblem {
  std::int64_t batch = 1;     ///< B
  std::int64_t heads_q = 1;   ///< H_q
  std::int64_t heads_kv = 1;  ///< H_kv (H_q % H_kv == 0)
  std::int64_t n_q = 0;       ///< N_q tokens
  std::int64_t n_kv = 0;      ///< N_kv tokens
  std::int64_t head_dim = 0;  ///< D (workspace sizing)
};

/// The parameters that depend on the plan alone (mapping factors, traversal, split, tiles); the mask and problem
/// fields keep their defaults. No checks.
prep::PrepParams plan_mapping_params(const Plan& plan);

/// Derives the builders' parameters. Checks the plan (check_plan), that the mask extents match the problem
/// (n_qb == ceil(N_q / B_Q), n_kvb == ceil(N_kv / B_KV), B_m in {1, B}, H_m in {1, H_q}, H_q % H_kv == 0) and
/// that every count fits int32. Throws Error(kInvalidArgument) naming "mask", "problem.<field>" or "plan.<field>".
prep::PrepParams make_prep_params(const Plan& plan, const MaskShape& mask, const PrepProblem& problem);

/// Upper bounds of the metadata sizes, from the plan, mu(M)'s shape and its active-block count only (no GPU work):
/// the device buffers are allocated from these, never from fixed capacities.
struct PrepBounds {
  std::int64_t tile_rows = 0;   ///< exact: B_m * H_m * ceil(n_qb / c_q)
  std::int64_t entries = 0;     ///< <= nnz * r_kv (coarsening and packing only merge)
  std::int64_t q_tiles = 0;     ///< exact: B * H_q * ceil(N_q / T_Q)
  std::int64_t items = 0;       ///< <= q_tiles * split
  std::int64_t partials = 0;    ///< <= items when split > 1, else 0
  std::int64_t merges = 0;      ///< <= q_tiles when split > 1, else 0
  std::int64_t metadata_bytes = 0;   ///< all metadata arrays at these bounds
  std::int64_t workspace_bytes = 0;  ///< split-KV partial O (fp32 [partials, T_Q, D]) + LSE (fp32 [partials, T_Q])
};

/// Size bounds for `plan` on a mask with `active_blocks` active blocks.
PrepBounds prep_bounds(const Plan& plan, const prep::PrepParams& params, std::int64_t active_blocks,
                       std::int64_t head_dim);

/// Exact split-KV workspace bytes for `n_partials` partial slots: n_partials * T_Q * (D + 1) * 4.
std::int64_t split_workspace_bytes(const Plan& plan, std::int64_t n_partials, std::int64_t head_dim) noexcept;

/// Prepared launch metadata in host memory (the CPU twins' output, or a GPU result copied back).
struct HostTileMetadata {
  prep::PrepParams params;
  std::vector<std::int32_t> tile_row_offsets;  ///< [tile_rows + 1]
  std::vector<std::int32_t> kv_tile;           ///< [n_entries] span forms; empty when packed
  std::vector<std::uint64_t> member;           ///< [n_entries] when the plan has membership; else empty
  std::vector<std::int32_t> gather_blocks;     ///< [n_entries * c_kv] packed form; else empty
  std::vector<WorkItem> items;                 ///< launch order
  std::vector<std::int32_t> merge_offsets;     ///< [n_merge + 1] ({0} when there is no split)
  std::vector<WorkItem> merge_targets;         ///< [n_merge]
  std::int32_t n_partials = 0;
  std::int32_t sub_q = 0, sub_kv = 0, block_kv = 0;
  std::int32_t items_per_cta = 1, persistent = 0;

  std::int64_t n_entries() const noexcept { return static_cast<std::int64_t>(tile_row_offsets.back()); }
  /// A view of these arrays (host pointers), valid while this object lives unchanged.
  TileMetadataView view() const noexcept;
  bool operator==(const HostTileMetadata& o) const;
};

// ---- CPU twins, one per builder (src/core/launch_prep_cpu_*.cpp) ----

/// Tile rows: tile_row_offsets, kv_tile / member / gather_blocks in ascending order (launch_prep_cpu_tiles.cpp).
void build_tile_rows_cpu(const prep::PrepParams& p, const HostMaskState& mask, HostTileMetadata& out);

/// Applies the plan's traversal order to every tile row in place (launch_prep_cpu_traversal.cpp).
void apply_traversal_cpu(const prep::PrepParams& p, HostTileMetadata& out);

/// Work items, split-KV partitions, partial slots and the merge index (launch_prep_cpu_items.cpp).
void build_work_items_cpu(const prep::PrepParams& p, HostTileMetadata& out);

/// Persistent work list: stable sort of the items by decreasing entry count (launch_prep_cpu_worklist.cpp).
void order_work_list_cpu(const prep::PrepParams& p, HostTileMetadata& out);

/// The whole preparation of `plan` for mu(M) on the CPU (launch_prep_cpu.cpp). Throws Error as make_prep_params.
HostTileMetadata prepare_plan_cpu(const Plan& plan, const HostMaskState& mask, const PrepProblem& problem);

/// Row-aligned layout (TileMetadataView::tile_row_ends) -> compact CSR, in place: `md` holds a row-aligned result
/// (tile_row_offsets = the rows' first entries and the extent [rows + 1], the entry arrays over the whole extent,
/// gaps included; items and merge targets with entry ranges in those positions) and `ends` the rows' ends [rows].
/// Afterwards md is what a compact builder writes: each row's entries moved to its compact offset, every item and
/// merge target shifted with its tile row. Throws Error(kInternal, "metadata.tile_row_ends" / ".items" /
/// ".merge_targets") when a row's range is not inside its span [offsets[t], offsets[t + 1]), the extent does not match
/// the arrays, or an item's range is not inside its row. Used by download_tile_metadata (cuda/launch_prep_gpu.hpp);
/// src/core/launch_prep_row_aligned.cpp.
void compact_row_aligned(HostTileMetadata& md, const std::vector<std::int32_t>& ends);

/// The inverse, for tests: spreads compact metadata into the row-aligned layout the GPU builders write (row t at
/// r_kv times mu(M)'s offset of its first logical row, `mask_row_offsets` [logical rows + 1]; gap entries set to
/// `fill`), shifting items and merge targets. Returns the rows' ends.
std::vector<std::int32_t> spread_row_aligned(HostTileMetadata& md, const std::vector<std::int32_t>& mask_row_offsets,
                                             std::int32_t fill);

/// Checks the metadata invariants (offsets monotone, entries in range, items cover every query tile exactly once
/// or through its partials, partial slots used once, membership bits only for existing sub-blocks, ...).
/// Throws Error(kInternal, "metadata.<array>") describing the first violation. For tests and tools.
void check_tile_metadata(const HostTileMetadata& md);

}  // namespace tessera
