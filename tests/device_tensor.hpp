#pragma once
// GPU test helpers: device copies of HostTensors (DeviceBuffer-backed TensorViews) and of a host mask state.
// All copies are synchronous (cudaMemcpy); errors throw tessera::Error(kCudaError).
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "cuda/check.cuh"
#include "host_tensor.hpp"
#include "tessera/cuda_types.hpp"
#include "tessera/mask.hpp"
#include "tessera/mask_state_gpu.hpp"

namespace tessera::testing {

/// A device copy of a HostTensor: same dtype, shape and bytes.
struct DeviceTensor {
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;
  DeviceBuffer buffer;

  void* data() const { return buffer.data(); }
  std::size_t bytes() const { return buffer.bytes(); }
  /// Contiguous device view with the HostTensor's shape.
  TensorView view() const { return make_tensor(buffer.data(), dtype, Device::kCuda, shape); }
};

/// Copies `t` into `dst` (which must have been made from a tensor of the same size).
inline void upload_into(const HostTensor& t, DeviceTensor& dst) {
  if (dst.buffer.bytes() < t.bytes.size()) throw Error(ErrorCode::kInternal, "", "upload_into: device tensor too small");
  if (!t.bytes.empty())
    TESSERA_CUDA_CHECK(cudaMemcpy(dst.buffer.data(), t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice));
}

/// Allocates device memory for `t` and copies it there.
inline DeviceTensor upload(const HostTensor& t) {
  DeviceTensor d;
  d.dtype = t.dtype;
  d.shape = t.shape;
  d.buffer = DeviceBuffer(t.bytes.size());
  upload_into(t, d);
  return d;
}

/// Copies a device tensor back into host memory.
inline HostTensor download(const DeviceTensor& d) {
  HostTensor t(d.dtype, d.shape);
  if (!t.bytes.empty())
    TESSERA_CUDA_CHECK(cudaMemcpy(t.bytes.data(), d.buffer.data(), t.bytes.size(), cudaMemcpyDeviceToHost));
  return t;
}

/// Waits for all device work; throws on an asynchronous error.
inline void device_sync() { TESSERA_CUDA_CHECK(cudaDeviceSynchronize()); }

/// Copies a host mask state (canonical block-CSR) to the device.
inline DeviceMaskState upload_mask_state(const HostMaskState& h) {
  DeviceMaskState d;
  d.shape = h.shape;
  d.nnz = static_cast<std::int64_t>(h.col_indices.size());
  d.stats = h.stats;
  const std::size_t ob = h.row_offsets.size() * sizeof(std::int32_t), cb = h.col_indices.size() * sizeof(std::int32_t);
  d.row_offsets = DeviceBuffer(ob);
  d.col_indices = DeviceBuffer(cb);
  if (ob) TESSERA_CUDA_CHECK(cudaMemcpy(d.row_offsets.data(), h.row_offsets.data(), ob, cudaMemcpyHostToDevice));
  if (cb) TESSERA_CUDA_CHECK(cudaMemcpy(d.col_indices.data(), h.col_indices.data(), cb, cudaMemcpyHostToDevice));
  return d;
}

/// Block-CSR BlockMask viewing a device mask state's arrays (for requests whose mask lives on the GPU).
inline BlockMask device_csr_mask(const DeviceMaskState& d) {
  return BlockMask::from_block_csr(
      make_tensor(d.row_offsets.data(), DType::kInt32, Device::kCuda, {d.shape.rows() + 1}),
      make_tensor(d.col_indices.data(), DType::kInt32, Device::kCuda, {d.nnz}), d.shape.batch, d.shape.heads,
      d.shape.n_qb, d.shape.n_kvb);
}

}  // namespace tessera::testing
