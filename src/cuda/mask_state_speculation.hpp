#pragma once
// Work enqueued before mu(M)'s one host synchronization (Runtime::run's speculative launch preparation,
// DESIGN.md section 6): build_mask_state_gpu() hands a caller the device counters that such work must test.
#include <cstdint>
#include <functional>

#include "tessera/mask_state_gpu.hpp"

namespace tessera {

/// mu(M)'s counters in device memory, final for any work enqueued on the stream after the hook below returns.
/// Work sized for `capacity` active blocks may read mu(M) (row_offsets and col_indices, written by then in stream
/// order) exactly when *error == 0 and *active <= capacity; otherwise it must not touch memory
/// (prep::PrepParams::gated_off).
struct MaskStateGate {
  const unsigned long long* active = nullptr;  ///< device: active blocks of mu(M)
  const unsigned long long* error = nullptr;   ///< device: nonzero when the mask's contents are invalid
  std::int64_t capacity = 0;                   ///< active blocks out.col_indices holds when the hook runs
};

/// build_mask_state_gpu(mask, stream, workspace, out), calling `before_wait` (if set) once mu(M)'s passes are
/// enqueued and before the host waits for the counters: not called when col_indices is written only after the wait
/// (MaskStateWorkspace::Impl::speculative_pass2 off). out.shape and the buffers' pointers are set when it runs; out.nnz
/// is not. After the wait, the gate passed exactly when out.nnz <= gate.capacity (an invalid mask throws).
void build_mask_state_gpu(const BlockMask& mask, Stream stream, MaskStateWorkspace& workspace, DeviceMaskState& out,
                          const std::function<void(const MaskStateGate&)>& before_wait);

/// Host time (microseconds) the last build_mask_state_gpu() call on `workspace` spent waiting for mu(M)'s counters:
/// the part of its host time that is a wait for the GPU.
double last_wait_us(MaskStateWorkspace& workspace);

}  // namespace tessera
