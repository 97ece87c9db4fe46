#include <cuda_runtime.h>

#include <utility>

#include "cuda/check.cuh"
#include "tessera/cuda_types.hpp"

namespace tessera {

DeviceBuffer::DeviceBuffer(std::size_t bytes) { reserve(bytes); }

DeviceBuffer::~DeviceBuffer() {
  if (data_) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::reserve(std::size_t bytes) {
  if (bytes <= bytes_) return;
  if (data_) {
    TESSERA_CUDA_CHECK(cudaFree(data_));
    data_ = nullptr;
    bytes_ = 0;
  }
  TESSERA_CUDA_CHECK(cudaMalloc(&data_, bytes));
  bytes_ = bytes;
}

int cuda_device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

}  // namespace tessera
