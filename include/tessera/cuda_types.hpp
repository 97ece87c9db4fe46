#pragma once
/// @file cuda_types.hpp
/// CUDA handle types and an owning device buffer, declared without including CUDA headers.

#include <cstddef>

struct CUstream_st;

namespace tessera {

/// A CUDA stream handle (the same type as cudaStream_t). nullptr is the legacy default stream.
using Stream = CUstream_st*;

/// Owning, move-only buffer of device memory (cudaMalloc/cudaFree). Never managed memory.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// Allocates `bytes` bytes of device memory (0 allocates nothing). Throws Error(kCudaError) on failure.
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const noexcept { return data_; }
  template <class T>
  T* as() const noexcept { return static_cast<T*>(data_); }
  std::size_t bytes() const noexcept { return bytes_; }
  /// Grows the buffer to at least `bytes` (contents are not preserved when it grows).
  void reserve(std::size_t bytes);

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// Number of CUDA devices visible (0 where there is no GPU or no driver; never throws).
int cuda_device_count() noexcept;

}  // namespace tessera
