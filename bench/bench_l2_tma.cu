// How fast can TMA move K/V tiles from L2 into shared memory on this GPU, with no computation at all? The small-block
// families' wgmma plans (bench/NOTES.md, session 22) run at rates that a fixed L2 -> SM byte rate of ~7.7-8.2 TB/s
// would explain: useful TF/s = (useful query rows per K/V byte delivered) x (bytes per second). This probe measures
// that ceiling directly, with the attention kernels' own access pattern and PTX layer: a producer thread per CTA
// issues 2-D boxes of `box_rows` tokens x 64 head-dim elements (128-byte swizzle, the wgmma operand layout) into a
// ring of 32 KB stages (128 tokens x D = 128, one K or V tile), one box per slot and panel as the packed KV tiles
// load them (box_rows = 16/32/64: the kv16p8/kv32p4/kv64p2 gathers; 128: a span tile); a consumer warp waits for each
// stage and releases it at once. Slots come from random kv blocks of the CTA's head, so the working set is
// heads x tokens x 256 bytes (fits the 50 MB L2 for a few heads, as in the attention kernels, whose concurrent CTAs
// cover a few heads at a time; 16 heads of 32,768 tokens stream from HBM).
// Checked: the first element of slot 0 of every stage must be the value written at its (token, head); a mismatch
// fails the run.
// Output: one line per configuration on stdout and bench_l2_tma.json in --out DIR.
//   bench_l2_tma [--out DIR] [--loads N] [--config BOX,STAGES,CTAS,HEADS]
//   (N: 32 KB stages per CTA, default 3000; --config: that configuration only, e.g. for Nsight Compute)
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cuda/check.cuh"
#include "kernels/ptx/mbarrier.cuh"
#include "kernels/ptx/proxy_fence.cuh"
#include "kernels/ptx/tma.cuh"
#include "kernels/wgmma/tensor_map.hpp"
#include "tessera/version.hpp"

namespace {

constexpr int kD = 128, kTileRows = 128, kPanelBytes = kTileRows * 128, kStageBytes = 2 * kPanelBytes;  // 32 KB

__host__ __device__ inline std::uint32_t mix(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

/// The value stored at (token n, head h, any column): small integers, exact in bf16.
__host__ __device__ inline float cell(int n, int h) { return static_cast<float>((n * 7 + h * 3) % 251); }

/// The first token of slot `slot` of load `i` of CTA `cta`: a random kv block of box_rows tokens.
__device__ inline int slot_row(int cta, int i, int slot, int n_blocks, int box_rows) {
  return static_cast<int>(mix(static_cast<std::uint32_t>(cta) * 0x9E3779B9u ^ mix(i * 16 + slot)) % n_blocks) *
         box_rows;
}

__global__ void fill_kernel(__nv_bfloat16* x, int tokens, int heads) {
  const std::int64_t total = std::int64_t(tokens) * heads * kD;
  for (std::int64_t k = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; k < total;
       k += std::int64_t(gridDim.x) * blockDim.x) {
    const int h = static_cast<int>((k / kD) % heads), n = static_cast<int>(k / (kD * heads));
    x[k] = __float2bfloat16(cell(n, h));
  }
}

/// Warp 0 lane 0 (parallel: lanes 0 .. slots-1 of warp 0): producer; warp 1 lane 0: consumer (waits, checks slot 0's
/// first element, releases).
__global__ void __launch_bounds__(64) stream_kernel(const __grid_constant__ CUtensorMap map, int tokens, int heads,
                                                    int box_rows, int stages, int loads, int parallel,
                                                    unsigned* bad) {
  extern __shared__ unsigned char raw[];
  const std::uint32_t raw_addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(raw));
  unsigned char* base = raw + (((raw_addr + 1023u) & ~1023u) - raw_addr);
  auto* full = reinterpret_cast<std::uint64_t*>(base + std::size_t(stages) * kStageBytes);
  std::uint64_t* empty = full + stages;
  const int head = blockIdx.x % heads, n_blocks = tokens / box_rows, slots = kTileRows / box_rows;
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) tessera::ptx::mbarrier_init(full + s, 1), tessera::ptx::mbarrier_init(empty + s, 1);
    tessera::ptx::fence_barrier_init();
  }
  __syncthreads();
  if (threadIdx.x < (parallel ? 32 : 1)) {  // parallel: lane j issues slot j (lane 0 arms the barrier first)
    const int lane = threadIdx.x;
    if (lane == 0) tessera::ptx::prefetch_tensor_map(&map);
    for (int i = 0; i < loads; ++i) {
      const int s = i % stages;
      if (i >= stages) tessera::ptx::mbarrier_wait(empty + s, ((i / stages) - 1) & 1);
      if (lane == 0) tessera::ptx::mbarrier_arrive_expect_tx(full + s, kStageBytes);
      if (parallel) __syncwarp();
      unsigned char* dst = base + std::size_t(s) * kStageBytes;
      for (int j = parallel ? lane : 0; j < slots; j += parallel ? 32 : 1) {
        const int row = slot_row(blockIdx.x, i, j, n_blocks, box_rows);
        for (int panel = 0; panel < 2; ++panel)
          tessera::ptx::tma_load_4d(dst + panel * kPanelBytes + j * box_rows * 128, &map, panel * 64, row, head, 0,
                                    full + s);
      }
    }
  } else if (threadIdx.x == 32) {
    unsigned mismatches = 0;
    for (int i = 0; i < loads; ++i) {
      const int s = i % stages;
      tessera::ptx::mbarrier_wait(full + s, (i / stages) & 1);
      const auto* stage = reinterpret_cast<const __nv_bfloat16*>(base + std::size_t(s) * kStageBytes);
      const int row = slot_row(blockIdx.x, i, 0, n_blocks, box_rows);
      if (__bfloat162float(stage[0]) != cell(row, head)) ++mismatches;
      tessera::ptx::fence_proxy_async_shared();  // the generic read above before the next async write
      tessera::ptx::mbarrier_arrive(empty + s);
    }
    if (mismatches) atomicAdd(bad, mismatches);
  }
}

struct Config {
  int box_rows, stages, ctas_per_sm, heads;
};

}  // namespace

int main(int argc, char** argv) {
  std::string out_dir = ".";
  int loads = 3000;
  int only[4] = {0, 0, 0, 0};  // --config: box_rows, stages, ctas_per_sm, heads (0: all)
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) out_dir = argv[++i];
    else if (a == "--loads" && i + 1 < argc) loads = std::max(1, std::atoi(argv[++i]));
    else if (a == "--config" && i + 1 < argc &&
             std::sscanf(argv[++i], "%d,%d,%d,%d", &only[0], &only[1], &only[2], &only[3]) == 4) {
    } else {
      std::fprintf(stderr, "usage: bench_l2_tma [--out DIR] [--loads N] [--config BOX,STAGES,CTAS,HEADS]\n");
      return 2;
    }
  }
  try {
    cudaDeviceProp prop{};
    TESSERA_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    if (prop.major != 9) {
      std::fprintf(stderr, "bench_l2_tma needs an sm_90 GPU (found sm_%d%d)\n", prop.major, prop.minor);
      return 2;
    }
    const int tokens = 32768, max_heads = 16;
    __nv_bfloat16* x = nullptr;
    TESSERA_CUDA_CHECK(cudaMalloc(&x, std::size_t(tokens) * max_heads * kD * sizeof(__nv_bfloat16)));
    unsigned* bad = nullptr;
    TESSERA_CUDA_CHECK(cudaMalloc(&bad, sizeof(unsigned)));
    TESSERA_CUDA_CHECK(cudaMemset(bad, 0, sizeof(unsigned)));
    TESSERA_CUDA_CHECK(cudaFuncSetAttribute(stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
    TESSERA_CUDA_CHECK(cudaFuncSetAttribute(stream_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
    cudaEvent_t e0, e1;
    TESSERA_CUDA_CHECK(cudaEventCreate(&e0));
    TESSERA_CUDA_CHECK(cudaEventCreate(&e1));
    nlohmann::json rows = nlohmann::json::array();
    std::printf("%5s %6s %4s %5s %8s %10s %8s %9s\n", "box", "stages", "cta", "heads", "parallel", "ws_MB", "TB/s", "us");
    for (int parallel : {0, 1})
    for (int heads : {2, 4, 16}) {
      if (parallel && heads != 4) continue;
      int filled = 0;  // the tensor's layout depends on heads: filled once per heads value
      for (int box_rows : {16, 32, 64, 128}) {
        tessera::kernels::wgmma::TensorMapSpec spec;
        spec.base = x;
        spec.batch = 1, spec.tokens = tokens, spec.heads = heads, spec.head_dim = kD;
        spec.stride_n = std::int64_t(heads) * kD, spec.stride_h = kD, spec.stride_b = std::int64_t(tokens) * heads * kD;
        spec.box_rows = box_rows;
        CUtensorMap map;
        tessera::kernels::wgmma::encode_tensor_map(map, spec, "x");
        if (!filled) {
          fill_kernel<<<1024, 256>>>(x, tokens, heads);
          TESSERA_CUDA_CHECK_LAUNCH();
          filled = 1;
        }
        for (int ctas_per_sm : {1, 2, 3}) {
          for (int stages : {2, 3, 4, 6}) {
            const std::size_t need = std::size_t(stages) * kStageBytes + 1024 + 2 * stages * 8;
            const std::size_t per_cta = 228 * 1024 / ctas_per_sm - 1024;  // 1 KB reserved per resident CTA
            if (need > per_cta || need > 227 * 1024) continue;
            if (only[0] && (parallel || box_rows != only[0] || stages != only[1] || ctas_per_sm != only[2] || heads != only[3]))
              continue;
            const std::size_t smem = std::min<std::size_t>(per_cta, 227 * 1024);  // pads to ctas_per_sm per SM
            int resident = 0;
            TESSERA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, stream_kernel, 64, smem));
            if (resident != ctas_per_sm) continue;
            const int grid = prop.multiProcessorCount * ctas_per_sm;
            std::vector<float> ms;
            for (int rep = 0; rep < 6; ++rep) {
              TESSERA_CUDA_CHECK(cudaEventRecord(e0));
              stream_kernel<<<grid, 64, smem>>>(map, tokens, heads, box_rows, stages, loads, parallel, bad);
              TESSERA_CUDA_CHECK_LAUNCH();
              TESSERA_CUDA_CHECK(cudaEventRecord(e1));
              TESSERA_CUDA_CHECK(cudaEventSynchronize(e1));
              float t = 0;
              TESSERA_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
              if (rep > 0) ms.push_back(t);  // the first launch warms L2 and the clocks
            }
            std::sort(ms.begin(), ms.end());
            const double med_ms = ms[ms.size() / 2];
            const double bytes = double(grid) * loads * kStageBytes;
            const double tbs = bytes / (med_ms * 1e-3) / 1e12;
            const double ws_mb = double(tokens) * heads * kD * 2 / 1e6;
            std::printf("%5d %6d %4d %5d %8d %10.1f %8.2f %9.1f\n", box_rows, stages, ctas_per_sm, heads, parallel, ws_mb, tbs,
                        med_ms * 1e3);
            rows.push_back({{"box_rows", box_rows}, {"stages", stages}, {"ctas_per_sm", ctas_per_sm},
                            {"heads", heads}, {"parallel_issue", parallel}, {"working_set_mb", ws_mb}, {"tb_per_s", tbs}, {"median_us", med_ms * 1e3},
                            {"bytes", bytes}});
          }
        }
      }
    }
    unsigned mismatches = 0;
    TESSERA_CUDA_CHECK(cudaMemcpy(&mismatches, bad, sizeof(unsigned), cudaMemcpyDeviceToHost));
    nlohmann::json doc = {{"benchmark", "bench_l2_tma"},
                          {"gpu", prop.name},
                          {"sms", prop.multiProcessorCount},
                          {"git_revision", tessera::git_revision()},
                          {"loads_per_cta", loads},
                          {"stage_bytes", kStageBytes},
                          {"mismatches", mismatches},
                          {"rows", rows}};
    std::filesystem::create_directories(out_dir);
    std::ofstream(std::filesystem::path(out_dir) / "bench_l2_tma.json") << doc.dump(1) << "\n";
    if (mismatches) {
      std::fprintf(stderr, "bench_l2_tma: %u stages held the wrong data\n", mismatches);
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_l2_tma: %s\n", e.what());
    return 1;
  }
}
