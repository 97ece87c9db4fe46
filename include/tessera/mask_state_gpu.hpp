#pragma once
/// @file mask_state_gpu.hpp
/// mu(M) built on the GPU (DESIGN.md section 5): canonical block-CSR in device memory; only the scalar
/// statistics come back to the host.
#include <cstdint>

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

/// Builds mu(M) on the GPU from a mask whose tensors are in GPU memory, on `stream`. Validates the mask's
/// contents on the device (index ranges, order, duplicates, CSR offsets) and throws tessera::Error naming
/// "mask.<field>" when they are invalid. Synchronizes `stream` once to read the counters back.
/// Bit-identical to build_mask_state_cpu() on the same mask.
DeviceMaskState build_mask_state_gpu(const BlockMask& mask, Stream stream);

/// Copies a DeviceMaskState into host memory (tests, tools). Synchronizes `stream`.
HostMaskState download_mask_state(const DeviceMaskState& state, Stream stream);

}  // namespace tessera
