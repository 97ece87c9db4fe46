#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <limits>

#include "cuda/check.cuh"
#include "device_tensors.hpp"
#include "tessera/error.hpp"

namespace tessera::tools {

namespace {

__device__ __forceinline__ std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

__device__ __forceinline__ float load_as_float(const void* p, DType t, std::int64_t i) {
  switch (t) {
    case DType::kBFloat16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case DType::kFloat16: return __half2float(static_cast<const __half*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void store_float(void* p, DType t, std::int64_t i, float v) {
  switch (t) {
    case DType::kBFloat16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(v); break;
    case DType::kFloat16: static_cast<__half*>(p)[i] = __float2half(v); break;
    default: static_cast<float*>(p)[i] = v; break;
  }
}

__global__ void fill_random_kernel(void* p, DType t, std::int64_t n, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::uint64_t h = mix64(seed * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(i));
    // Sum of four uniforms, centred and scaled to unit variance: cheap, bell-shaped, never zero-heavy.
    float s = 0;
    for (int k = 0; k < 4; ++k) s += static_cast<float>((h >> (16 * k)) & 0xffff) * (1.0f / 65536.0f);
    store_float(p, t, i, (s - 2.0f) * 1.7320508f);
  }
}

__global__ void fill_nan_kernel(void* p, DType t, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    store_float(p, t, i, __int_as_float(0x7fc00000));
}

__global__ void l2_kernel(const void* a, DType ta, const void* b, DType tb, std::int64_t n, double* out) {
  double num = 0, den = 0, bad = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float x = load_as_float(a, ta, i), y = load_as_float(b, tb, i);
    if (!isfinite(x)) bad += 1;
    const double d = static_cast<double>(x) - static_cast<double>(y);
    num += d * d;
    den += static_cast<double>(y) * y;
  }
  for (int o = 16; o > 0; o >>= 1) {
    num += __shfl_down_sync(0xffffffffu, num, o);
    den += __shfl_down_sync(0xffffffffu, den, o);
    bad += __shfl_down_sync(0xffffffffu, bad, o);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(out, num);
    atomicAdd(out + 1, den);
    atomicAdd(out + 2, bad);
  }
}

int grid_for(std::int64_t n) { return static_cast<int>(std::min<std::int64_t>((n + 255) / 256, 132 * 16)); }

}  // namespace

DeviceTensor make_device_tensor(DType dtype, const std::vector<std::int64_t>& shape) {
  DeviceTensor t;
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  t.buffer.reserve(static_cast<std::size_t>(n) * dtype_size(dtype));
  t.view = make_tensor(t.buffer.data(), dtype, Device::kCuda, shape);
  return t;
}

void fill_random(const TensorView& t, std::uint64_t seed, Stream stream) {
  const std::int64_t n = t.numel();
  if (n == 0) return;
  fill_random_kernel<<<grid_for(n), 256, 0, stream>>>(t.data, t.dtype, n, seed);
  TESSERA_CUDA_CHECK_LAUNCH();
}

void fill_nan(const TensorView& t, Stream stream) {
  const std::int64_t n = t.numel();
  if (n == 0) return;
  fill_nan_kernel<<<grid_for(n), 256, 0, stream>>>(t.data, t.dtype, n);
  TESSERA_CUDA_CHECK_LAUNCH();
}

void upload_bytes(const TensorView& t, const void* host, std::size_t bytes, Stream stream) {
  if (bytes != static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype))
    throw Error(ErrorCode::kInternal, "upload_bytes", "size mismatch");
  TESSERA_CUDA_CHECK(cudaMemcpyAsync(t.data, host, bytes, cudaMemcpyHostToDevice, stream));
}

double relative_l2_gpu(const TensorView& a, const TensorView& b, Stream stream) {
  if (a.numel() != b.numel()) throw Error(ErrorCode::kInternal, "relative_l2_gpu", "sizes differ");
  DeviceBuffer acc(3 * sizeof(double));
  TESSERA_CUDA_CHECK(cudaMemsetAsync(acc.data(), 0, 3 * sizeof(double), stream));
  l2_kernel<<<grid_for(a.numel()), 256, 0, stream>>>(a.data, a.dtype, b.data, b.dtype, a.numel(), acc.as<double>());
  TESSERA_CUDA_CHECK_LAUNCH();
  double h[3];
  TESSERA_CUDA_CHECK(cudaMemcpyAsync(h, acc.data(), sizeof h, cudaMemcpyDeviceToHost, stream));
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (h[2] > 0) return std::numeric_limits<double>::infinity();
  if (h[1] == 0) return h[0] == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(h[0] / h[1]);
}

}  // namespace tessera::tools
