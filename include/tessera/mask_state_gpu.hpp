#pragma once
/// @file mask_state_gpu.hpp
/// mu(M) built on the GPU (DESIGN.md section 5): canonical block-CSR in device memory; only the scalar
/// statistics come back to the host.
#include <cstdint>
#include <memory>

#include "tessera/cuda_types.hpp"
#include "tessera/mask_state.hpp"

namespace tessera {

/// mu(M) in device memory. row_offsets: int32 [rows + 1]; col_indices: int32 [nnz], strictly increasing per row.
struct DeviceMaskState {
  MaskShape shape;
  std::int64_t nnz = 0;
  DeviceBuffer row_offsets;
  DeviceBuffer col_indices;
  MaskStats stats;
};

/// Reusable scratch memory of build_mask_state_gpu() (device scratch, pinned host memory for the counters, the
/// CUB scan's temporary storage). Grows to fit the largest mask seen; keep one per stream to keep allocations
/// out of the hot path. Not thread-safe; move-only.
class MaskStateWorkspace {
 public:
  MaskStateWorkspace();
  ~MaskStateWorkspace();
  MaskStateWorkspace(MaskStateWorkspace&&) noexcept;
  MaskStateWorkspace& operator=(MaskStateWorkspace&&) noexcept;
  MaskStateWorkspace(const MaskStateWorkspace&) = delete;
  MaskStateWorkspace& operator=(const MaskStateWorkspace&) = delete;

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

/// As build_mask_state_gpu(mask, stream), reusing `workspace` and the buffers of `out` (they only grow).
/// Sequence on `stream`: one pass over the mask (validation, per-row counts, counters), an exclusive scan of the
/// row counts into out.row_offsets, one device-to-host copy of the counters and the first-error word, one
/// synchronization; then (mask valid) a second pass that writes out.col_indices, left running on `stream`.
/// Errors: Error(kInvalidArgument, "mask.<field>") exactly as build_mask_state_cpu() raises them (wording and
/// which error comes first); kUnsupported beyond 2^31 - 1 active blocks or when a row's bitmap (n_kvb / 8 bytes)
/// does not fit in shared memory for index-list inputs; kCudaError on CUDA failures. On error,
/// `out` holds unspecified contents.
void build_mask_state_gpu(const BlockMask& mask, Stream stream, MaskStateWorkspace& workspace, DeviceMaskState& out);

/// Builds mu(M) on the GPU from a mask whose tensors are in GPU memory, on `stream`. Validates the mask's
/// contents on the device (index ranges, order, duplicates, CSR offsets) and throws tessera::Error naming
/// "mask.<field>" when they are invalid. Synchronizes `stream` once to read the counters back.
/// Bit-identical to build_mask_state_cpu() on the same mask.
DeviceMaskState build_mask_state_gpu(const BlockMask& mask, Stream stream);

/// Copies a DeviceMaskState into host memory (tests, tools). Synchronizes `stream`.
HostMaskState download_mask_state(const DeviceMaskState& state, Stream stream);

}  // namespace tessera
