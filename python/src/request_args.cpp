// Argument conversion shared by the CPU and GPU entry points.
#include "request_args.hpp"

#include <nanobind/stl/string.h>

#include "tessera/error.hpp"
#include "tessera/runtime.hpp"

namespace tessera::py {

namespace nb = nanobind;

AttentionRequest make_request(const Array& q, const Array& k, const Array& v, const Array& o,
                              const std::optional<Array>& lse, int block_q, int block_kv, int mask_kind,
                              const Array& m0, const std::optional<Array>& m1, std::int64_t mb, std::int64_t mh,
                              std::int64_t n_qb, std::int64_t n_kvb, std::optional<double> scale) {
  AttentionRequest r;
  r.q = to_view(q, "q");
  r.k = to_view(k, "k");
  r.v = to_view(v, "v");
  r.o = to_view(o, "o");
  if (lse) r.lse = to_view(*lse, "lse");
  r.geometry.block_q = block_q;
  r.geometry.block_kv = block_kv;
  if (scale) r.scale = *scale;
  switch (mask_kind) {
    case kMaskDense:
      r.mask = BlockMask::from_dense(to_view(m0, "mask.dense"));
      break;
    case kMaskCsr:
      if (!m1) throw Error(ErrorCode::kInvalidArgument, "mask.col_indices", "not given");
      r.mask = BlockMask::from_block_csr(to_view(m0, "mask.row_offsets"), to_view(*m1, "mask.col_indices"), mb, mh,
                                         n_qb, n_kvb);
      break;
    case kMaskIndexLists:
      if (!m1) throw Error(ErrorCode::kInvalidArgument, "mask.indices", "not given");
      r.mask = BlockMask::from_index_lists(to_view(m0, "mask.counts"), to_view(*m1, "mask.indices"), n_kvb);
      break;
    default:
      throw Error(ErrorCode::kInvalidArgument, "mask", "unknown mask kind " + std::to_string(mask_kind));
  }
  return r;
}

nb::dict dispatch_to_dict(const DispatchInfo& info) {
  nb::dict d;
  d["plan_id"] = info.plan_id;
  d["regime"] = info.regime;
  d["source"] = info.source;
  d["table_status"] = info.table_status;
  d["ranks_skipped"] = info.ranks_skipped;
  d["cache_hit"] = info.cache_hit;
  d["prepare_speculated"] = info.prepare_speculated;
  d["prepare_speculation_hit"] = info.prepare_speculation_hit;
  const MaskStats& s = info.stats;
  d["mask_shape"] = nb::make_tuple(s.shape.batch, s.shape.heads, s.shape.n_qb, s.shape.n_kvb);
  d["active_blocks"] = s.counters.active_blocks;
  d["runs"] = s.counters.runs;
  d["density"] = s.density;
  d["run_coverage"] = s.run_coverage;
  d["mean_run_length"] = s.mean_run_length;
  d["mean_row_active"] = s.mean_row_active;
  d["row_imbalance"] = s.row_imbalance;
  d["coarsen_cost2"] = s.coarsen_cost[0];
  d["coarsen_cost4"] = s.coarsen_cost[1];
  d["coarsen_cost8"] = s.coarsen_cost[2];
  d["max_row_active"] = s.max_row_active;
  d["empty_rows"] = s.empty_rows;
  d["host_mask_state_us"] = info.host_mask_state_us;
  d["host_select_us"] = info.host_select_us;
  d["host_dispatch_us"] = info.host_dispatch_us;
  d["host_prepare_us"] = info.host_prepare_us;
  d["host_launch_us"] = info.host_launch_us;
  d["total_ms"] = info.total_ms;
  d["kernel_ms"] = info.kernel_ms;
  return d;
}

}  // namespace tessera::py
