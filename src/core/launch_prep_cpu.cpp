// Launch preparation on the CPU: parameters, size bounds, the driver of the CPU twins.
#include <fmt/core.h>

#include <limits>

#include "core/launch_prep.hpp"
#include "tessera/error.hpp"
#include "tessera/geometry.hpp"

namespace tessera {

prep::PrepParams plan_mapping_params(const Plan& plan) {
  prep::PrepParams p;
  p.c_q = plan.q.kind == MappingKind::kCoarsen ? plan.q.factor : 1;
  p.r_q = plan.q.refine();
  p.c_kv = plan.kv.kind == MappingKind::kCoarsen ? plan.kv.factor : 1;
  p.r_kv = plan.kv.refine();
  p.pack = plan.packed_kv() ? plan.kv.factor : 0;
  p.membership = plan.has_membership() ? 1 : 0;
  p.traversal = static_cast<std::int32_t>(plan.org.traversal);
  p.split = plan.org.split;
  p.tile_q = plan.tile_q();
  p.tile_kv = plan.tile_kv();
  return p;
}

prep::PrepParams make_prep_params(const Plan& plan, const MaskShape& mask, const PrepProblem& pr) {
  check_plan(plan);
  auto bad = [](const char* arg, std::string msg) { throw Error(ErrorCode::kInvalidArgument, arg, std::move(msg)); };
  if (pr.batch < 1 || pr.heads_q < 1 || pr.heads_kv < 1 || pr.n_q < 1 || pr.n_kv < 1)
    bad("problem", fmt::format("batch, heads_q, heads_kv, n_q, n_kv must be >= 1 (got {}, {}, {}, {}, {})", pr.batch,
                               pr.heads_q, pr.heads_kv, pr.n_q, pr.n_kv));
  if (pr.heads_q % pr.heads_kv != 0)
    bad("problem.heads_kv", fmt::format("H_q = {} is not a multiple of H_kv = {}", pr.heads_q, pr.heads_kv));
  if (mask.n_qb != num_blocks(pr.n_q, plan.block_q))
    bad("mask.n_qb", fmt::format("n_qb = {} != ceil(N_q / B_Q) = {}", mask.n_qb, num_blocks(pr.n_q, plan.block_q)));
  if (mask.n_kvb != num_blocks(pr.n_kv, plan.block_kv))
    bad("mask.n_kvb",
        fmt::format("n_kvb = {} != ceil(N_kv / B_KV) = {}", mask.n_kvb, num_blocks(pr.n_kv, plan.block_kv)));
  if (mask.batch != 1 && mask.batch != pr.batch)
    bad("mask.batch", fmt::format("mask batch {} must be 1 or B = {}", mask.batch, pr.batch));
  if (mask.heads != 1 && mask.heads != pr.heads_q)
    bad("mask.heads", fmt::format("mask heads {} must be 1 or H_q = {}", mask.heads, pr.heads_q));
  prep::PrepParams p = plan_mapping_params(plan);
  p.mask_batch = mask.batch;
  p.mask_heads = mask.heads;
  p.n_qb = mask.n_qb;
  p.n_kvb = mask.n_kvb;
  p.batch = pr.batch;
  p.heads_q = pr.heads_q;
  p.n_q = pr.n_q;
  p.n_kv = pr.n_kv;
  p.rows_per_head = num_blocks(mask.n_qb, p.c_q);
  p.q_tiles_per_head = num_blocks(pr.n_q, p.tile_q);
  p.kv_tiles = num_blocks(pr.n_kv, p.tile_kv);
  constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
  if (p.tile_rows() >= kMax || p.q_tiles() * p.split >= kMax || mask.total_blocks() * p.r_kv >= kMax ||
      pr.n_q >= kMax || pr.n_kv >= kMax)
    bad("problem", "metadata counts exceed int32");
  return p;
}

std::int64_t split_workspace_bytes(const Plan& plan, std::int64_t n_partials, std::int64_t head_dim) noexcept {
  return n_partials * plan.tile_q() * (head_dim + 1) * 4;
}

PrepBounds prep_bounds(const Plan& plan, const prep::PrepParams& p, std::int64_t active_blocks, std::int64_t head_dim) {
  PrepBounds b;
  b.tile_rows = p.tile_rows();
  b.entries = active_blocks * p.r_kv;
  b.q_tiles = p.q_tiles();
  b.items = b.q_tiles * p.split;
  b.partials = p.split > 1 ? b.items : 0;
  b.merges = p.split > 1 ? b.q_tiles : 0;
  b.metadata_bytes = (b.tile_rows + 1) * 4 + b.tile_rows * 4 /* row-aligned ends */ +
                     b.entries * (p.pack ? 4 * p.pack : 4) +
                     b.entries * prep::member_bytes(p) + b.items * static_cast<std::int64_t>(sizeof(WorkItem)) +
                     (b.merges + 1) * 4 + b.merges * static_cast<std::int64_t>(sizeof(WorkItem));
  b.workspace_bytes = split_workspace_bytes(plan, b.partials, head_dim);
  return b;
}

TileMetadataView HostTileMetadata::view() const noexcept {
  TileMetadataView v;
  v.items = items.data();
  v.n_items = static_cast<std::int32_t>(items.size());
  v.kv_tile = kv_tile.empty() ? nullptr : kv_tile.data();
  v.member = member.empty() ? nullptr : member.data();
  v.member_bytes = member.empty() ? 0 : static_cast<std::int32_t>(sizeof(std::uint64_t));
  v.gather_blocks = gather_blocks.empty() ? nullptr : gather_blocks.data();
  v.c_kv_gather = params.pack;
  v.n_entries = n_entries();
  v.merge_offsets = merge_offsets.data();
  v.merge_targets = merge_targets.empty() ? nullptr : merge_targets.data();
  v.n_merge = static_cast<std::int32_t>(merge_targets.size());
  v.n_partials = n_partials;
  v.tile_q = params.tile_q;
  v.tile_kv = params.tile_kv;
  v.sub_q = sub_q;
  v.sub_kv = sub_kv;
  v.block_kv = block_kv;
  v.items_per_cta = items_per_cta;
  v.persistent = persistent;
  v.tile_row_offsets = tile_row_offsets.data();
  v.n_tile_rows = static_cast<std::int32_t>(tile_row_offsets.size()) - 1;
  return v;
}

namespace {
bool same_item(const WorkItem& a, const WorkItem& b) {
  return a.batch == b.batch && a.head == b.head && a.q_start == b.q_start && a.q_len == b.q_len &&
         a.entry_begin == b.entry_begin && a.entry_end == b.entry_end && a.tile_row == b.tile_row &&
         a.partial == b.partial;
}
bool same_items(const std::vector<WorkItem>& a, const std::vector<WorkItem>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!same_item(a[i], b[i])) return false;
  }
  return true;
}
}  // namespace

bool HostTileMetadata::operator==(const HostTileMetadata& o) const {
  return tile_row_offsets == o.tile_row_offsets && kv_tile == o.kv_tile && member == o.member &&
         gather_blocks == o.gather_blocks && same_items(items, o.items) && merge_offsets == o.merge_offsets &&
         same_items(merge_targets, o.merge_targets) && n_partials == o.n_partials && sub_q == o.sub_q &&
         sub_kv == o.sub_kv && block_kv == o.block_kv && items_per_cta == o.items_per_cta &&
         persistent == o.persistent;
}

HostTileMetadata prepare_plan_cpu(const Plan& plan, const HostMaskState& mask, const PrepProblem& problem) {
  HostTileMetadata md;
  md.params = make_prep_params(plan, mask.shape, problem);
  if (static_cast<std::int64_t>(mask.row_offsets.size()) != mask.shape.rows() + 1)
    throw Error(ErrorCode::kInvalidArgument, "mask.row_offsets",
                fmt::format("has {} entries, expected rows + 1 = {}", mask.row_offsets.size(), mask.shape.rows() + 1));
  md.sub_q = plan.q.kind == MappingKind::kCoarsen ? plan.block_q : plan.tile_q();
  md.sub_kv = plan.kv.kind == MappingKind::kCoarsen ? plan.block_kv : plan.tile_kv();
  md.block_kv = plan.block_kv;
  md.items_per_cta = plan.org.group;
  md.persistent = plan.org.persistent ? 1 : 0;
  build_tile_rows_cpu(md.params, mask, md);
  apply_traversal_cpu(md.params, md);
  build_work_items_cpu(md.params, md);
  if (plan.org.persistent) order_work_list_cpu(md.params, md);
  return md;
}

}  // namespace tessera
