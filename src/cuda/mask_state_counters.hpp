#pragma once
// The mask-state kernels' counters (src/cuda/mask_state_*.cu), a plain struct so that host code (the workspace's
// pinned copy, tests) can hold one without the device helpers of mask_state_common.cuh.

namespace tessera::detail {

/// Counters in device memory, zeroed before the first pass. `error_inv` holds ~key of the smallest error key seen
/// (0 = no error); key = kind << 60 | flat position in the offending array.
struct DeviceCounters {
  unsigned long long active;
  unsigned long long runs;
  unsigned long long long_blocks;
  unsigned long long max_row;
  unsigned long long empty_rows;
  unsigned long long error_inv;
  unsigned long long coarsened[3];  ///< MaskCounters::coarsened_pairs (mask_state_coarsen.cu)
  unsigned long long pad[7];
};

}  // namespace tessera::detail
