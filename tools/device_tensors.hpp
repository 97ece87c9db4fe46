#pragma once
// Device tensors for the command-line tools (run, profile): owning buffers, random fills on the GPU, NaN
// poisoning and relative-L2 comparison on the GPU (outputs of 100+ MB are never copied to the host).
#include <cstdint>
#include <vector>

#include "tessera/cuda_types.hpp"
#include "tessera/tensor.hpp"

namespace tessera::tools {

/// An owning contiguous device tensor.
struct DeviceTensor {
  DeviceBuffer buffer;
  TensorView view;
};

/// Allocates a contiguous device tensor of `shape` (row-major).
DeviceTensor make_device_tensor(DType dtype, const std::vector<std::int64_t>& shape);

/// Fills with N(0, 1)-like values from a counter-based hash of (seed, index): fresh inputs per seed.
void fill_random(const TensorView& t, std::uint64_t seed, Stream stream);

/// Fills a floating tensor with NaN (outputs are poisoned before each run).
void fill_nan(const TensorView& t, Stream stream);

/// Copies host bytes into a device tensor of the same size.
void upload_bytes(const TensorView& t, const void* host, std::size_t bytes, Stream stream);

/// ||a - b|| / ||b|| over two contiguous device tensors of the same shape (bf16, f16 or f32, any mix);
/// +inf when `a` holds a NaN or inf. Synchronizes `stream`.
double relative_l2_gpu(const TensorView& a, const TensorView& b, Stream stream);

}  // namespace tessera::tools
