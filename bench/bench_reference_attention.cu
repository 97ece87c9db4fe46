// Times the fp32 GPU reference attention on a full-size request (default: Wan2.1 720p, 75,600 tokens, 40 heads,
// head_dim 128, bf16, B_Q = B_KV = 64, random block mask of density 0.3) to show it finishes in seconds.
// Usage: bench_reference_attention [--out DIR] [--tokens N] [--heads H] [--dim D] [--block B] [--density F]
// Prints one line and writes it to DIR/bench_reference_attention.txt when --out is given.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "cuda/check.cuh"
#include "tessera/reference.hpp"

namespace {

__global__ void fill_uniform(__nv_bfloat16* x, std::int64_t n, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint64_t h = (static_cast<std::uint64_t>(i) + seed) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    x[i] = __float2bfloat16_rn(static_cast<float>(h >> 40) / 8388608.0f - 1.0f);  // [-1, 1)
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t tokens = 75600, heads = 40, dim = 128;
  int block = 64;
  double density = 0.3;
  std::string out_dir;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--out") out_dir = v;
    else if (a == "--tokens") tokens = std::stoll(v);
    else if (a == "--heads") heads = std::stoll(v);
    else if (a == "--dim") dim = std::stoll(v);
    else if (a == "--block") block = std::stoi(v);
    else if (a == "--density") density = std::stod(v);
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  try {
    if (tessera::cuda_device_count() == 0) {
      std::printf("bench_reference_attention: no CUDA device, skipped\n");
      return 0;
    }
    const std::int64_t n = tokens * heads * dim;
    tessera::DeviceBuffer q(n * 2), k(n * 2), v(n * 2), o(n * 2), lse(heads * tokens * 4);
    fill_uniform<<<1024, 256>>>(q.as<__nv_bfloat16>(), n, 1);
    fill_uniform<<<1024, 256>>>(k.as<__nv_bfloat16>(), n, 2);
    fill_uniform<<<1024, 256>>>(v.as<__nv_bfloat16>(), n, 3);
    TESSERA_CUDA_CHECK_LAUNCH();

    // Random block mask, one mask head per query head, as canonical block-CSR.
    tessera::HostMaskState hm;
    const std::int64_t nb = tessera::num_blocks(tokens, block);
    hm.shape = {1, heads, nb, nb};
    std::mt19937_64 g(42);
    std::bernoulli_distribution on(density);
    hm.row_offsets.push_back(0);
    for (std::int64_t r = 0; r < hm.shape.rows(); ++r) {
      for (std::int64_t c = 0; c < nb; ++c)
        if (on(g)) hm.col_indices.push_back(static_cast<std::int32_t>(c));
      hm.row_offsets.push_back(static_cast<std::int32_t>(hm.col_indices.size()));
    }
    tessera::DeviceMaskState dm;
    dm.shape = hm.shape;
    dm.nnz = static_cast<std::int64_t>(hm.col_indices.size());
    dm.row_offsets = tessera::DeviceBuffer(hm.row_offsets.size() * 4);
    dm.col_indices = tessera::DeviceBuffer(hm.col_indices.size() * 4);
    TESSERA_CUDA_CHECK(cudaMemcpy(dm.row_offsets.data(), hm.row_offsets.data(), hm.row_offsets.size() * 4,
                                  cudaMemcpyHostToDevice));
    TESSERA_CUDA_CHECK(cudaMemcpy(dm.col_indices.data(), hm.col_indices.data(), hm.col_indices.size() * 4,
                                  cudaMemcpyHostToDevice));

    tessera::AttentionRequest r;
    using tessera::DType;
    using tessera::Device;
    r.q = tessera::make_tensor(q.data(), DType::kBFloat16, Device::kCuda, {1, tokens, heads, dim});
    r.k = tessera::make_tensor(k.data(), DType::kBFloat16, Device::kCuda, {1, tokens, heads, dim});
    r.v = tessera::make_tensor(v.data(), DType::kBFloat16, Device::kCuda, {1, tokens, heads, dim});
    r.o = tessera::make_tensor(o.data(), DType::kBFloat16, Device::kCuda, {1, tokens, heads, dim});
    r.lse = tessera::make_tensor(lse.data(), DType::kFloat32, Device::kCuda, {1, heads, tokens});
    r.geometry = {block, block};

    cudaEvent_t start, stop;
    TESSERA_CUDA_CHECK(cudaEventCreate(&start));
    TESSERA_CUDA_CHECK(cudaEventCreate(&stop));
    float ms = 0;
    for (int rep = 0; rep < 2; ++rep) {  // the first run includes one-time setup
      TESSERA_CUDA_CHECK(cudaEventRecord(start));
      tessera::reference_attention_gpu(r, dm, nullptr);
      TESSERA_CUDA_CHECK(cudaEventRecord(stop));
      TESSERA_CUDA_CHECK(cudaEventSynchronize(stop));
      TESSERA_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    }
    // Useful FLOPs: 4 * D per (query token, active kv token) pair (QK^T and PV).
    const double pairs = static_cast<double>(dm.nnz) * block * block;
    const double tflops = 4.0 * pairs * static_cast<double>(dim) / (ms * 1e-3) / 1e12;
    char line[512];
    std::snprintf(line, sizeof line,
                  "reference_attention_gpu: tokens=%lld heads=%lld dim=%lld block=%d density=%.3f nnz=%lld "
                  "time=%.1f ms (%.2f TFLOP/s fp32 useful)\n",
                  static_cast<long long>(tokens), static_cast<long long>(heads), static_cast<long long>(dim), block,
                  static_cast<double>(dm.nnz) / static_cast<double>(hm.shape.total_blocks()),
                  static_cast<long long>(dm.nnz), ms, tflops);
    std::fputs(line, stdout);
    if (!out_dir.empty()) std::ofstream(out_dir + "/bench_reference_attention.txt") << line;
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_reference_attention: %s\n", e.what());
    return 1;
  }
}
