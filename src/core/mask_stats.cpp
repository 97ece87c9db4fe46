// derive_mask_stats(): the only place where the ratios of s(M) are computed (CPU and GPU share it, so their
// statistics agree bit for bit).
#include "tessera/mask_state.hpp"

#include <limits>

namespace tessera {

MaskStats derive_mask_stats(const MaskShape& shape, const MaskCounters& c) noexcept {
  MaskStats s;
  s.shape = shape;
  s.counters = c;
  const std::int64_t total = shape.total_blocks();
  const std::int64_t rows = shape.rows();
  const double active = static_cast<double>(c.active_blocks);
  s.density = total > 0 ? active / static_cast<double>(total) : 0.0;
  s.run_coverage = c.active_blocks > 0 ? static_cast<double>(c.blocks_in_long_runs) / active : 0.0;
  s.mean_run_length = c.runs > 0 ? active / static_cast<double>(c.runs) : 0.0;
  s.mean_row_active = rows > 0 ? active / static_cast<double>(rows) : 0.0;
  s.row_imbalance =
      c.active_blocks > 0 ? static_cast<double>(c.max_row_active) * static_cast<double>(rows) / active : 0.0;
  s.max_row_active = c.max_row_active;
  s.empty_rows = c.empty_rows;
  const double pairs[4] = {active, static_cast<double>(c.coarsened_pairs[0]), static_cast<double>(c.coarsened_pairs[1]),
                           static_cast<double>(c.coarsened_pairs[2])};
  for (int i = 0; i < 3; ++i) s.coarsen_cost[i] = pairs[i] > 0 ? pairs[i + 1] / pairs[i] : 0.0;
  if (c.coarsened_pairs[0] < 0)  // not counted (build_mask_state_gpu for a request whose selection needs none)
    for (double& v : s.coarsen_cost) v = std::numeric_limits<double>::quiet_NaN();
  return s;
}

}  // namespace tessera
