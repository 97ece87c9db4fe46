// Benchmark of build_mask_state_gpu() on the Wan2.1 720p case (N = 75,600 tokens, 64 x 64 blocks -> n_qb = n_kvb =
// 1182, 40 heads, ~10% density in runs, ~5.6M active blocks), one row per input format (dense u8, block-CSR, index
// lists with unsorted rows). Each call is timed with CUDA events around the whole call (pass 1, scan, counters
// copy, the host's one synchronization, pass 2) after a warm-up; the median of --runs calls is reported, with the
// host wall-clock median. Output: a table on stdout and bench_mask_state.json in --out DIR (default ".").
//   bench_mask_state [--out DIR] [--runs N] [--warmup N]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "cuda/check.cuh"
#include "mask_gen.hpp"
#include "tessera/error.hpp"
#include "tessera/mask_state_gpu.hpp"
#include "tessera/version.hpp"

namespace {

using namespace tessera;
using namespace tessera::testing;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Result {
  std::string format;
  std::int64_t nnz = 0;
  double event_us = 0, wall_us = 0, min_event_us = 0;
};

/// Copies a host encoding to the device (same layout) and returns a mask viewing the copies.
BlockMask upload(HostMaskTensors& h, DeviceBuffer (&bufs)[2]) {
  BlockMask m = h.mask;
  for (int i = 0; i < 2; ++i) {
    TensorView* hv = h.slot(i);
    if (!hv) continue;
    bufs[i] = DeviceBuffer(h.buf[i].size());
    TESSERA_CUDA_CHECK(cudaMemcpy(bufs[i].data(), h.buf[i].data(), h.buf[i].size(), cudaMemcpyHostToDevice));
    const auto offset = static_cast<const unsigned char*>(hv->data) - h.buf[i].data();
    TensorView* dv = m.format == MaskFormat::kDense ? &m.dense
                     : m.format == MaskFormat::kBlockCsr ? (i == 0 ? &m.row_offsets : &m.col_indices)
                                                         : (i == 0 ? &m.counts : &m.indices);
    dv->data = bufs[i].as<unsigned char>() + offset;
    dv->device = Device::kCuda;
  }
  return m;
}

Result run(HostMaskTensors& h, int warmup, int runs, cudaStream_t stream) {
  DeviceBuffer bufs[2];
  const BlockMask mask = upload(h, bufs);
  MaskStateWorkspace ws;
  DeviceMaskState out;
  cudaEvent_t start, stop;
  TESSERA_CUDA_CHECK(cudaEventCreate(&start));
  TESSERA_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < warmup; ++i) build_mask_state_gpu(mask, stream, ws, out);
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> ev, wall;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    TESSERA_CUDA_CHECK(cudaEventRecord(start, stream));
    build_mask_state_gpu(mask, stream, ws, out);
    TESSERA_CUDA_CHECK(cudaEventRecord(stop, stream));
    TESSERA_CUDA_CHECK(cudaEventSynchronize(stop));
    const auto t1 = std::chrono::steady_clock::now();
    float ms = 0;
    TESSERA_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    ev.push_back(ms * 1e3);
    wall.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  TESSERA_CUDA_CHECK(cudaEventDestroy(start));
  TESSERA_CUDA_CHECK(cudaEventDestroy(stop));
  Result r;
  r.format = mask_format_name(mask.format);
  r.nnz = out.nnz;
  r.event_us = median(ev);
  r.min_event_us = *std::min_element(ev.begin(), ev.end());
  r.wall_us = median(wall);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_dir = ".";
  int runs = 100, warmup = 10;
  std::string command;
  for (int i = 0; i < argc; ++i) {
    if (i) command += " ";
    command += argv[i];
  }
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) {
      out_dir = argv[++i];
    } else if (a == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--warmup" && i + 1 < argc) {
      warmup = std::max(0, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--out DIR] [--runs N (default 100)] [--warmup N (default 10)]\n", argv[0]);
      return 2;
    }
  }
  try {
    if (cuda_device_count() == 0) {
      std::fprintf(stderr, "bench_mask_state: no CUDA device visible\n");
      return 1;
    }
    cudaDeviceProp prop{};
    TESSERA_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    const MaskShape s{1, 40, 1182, 1182};  // Wan2.1 720p: N = 75,600 tokens, 64 x 64 blocks, 40 heads
    std::mt19937_64 g(720);
    const auto bits = random_mask_bits(s, MaskPattern::kRuns, 0.1, g);
    cudaStream_t stream;
    TESSERA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    std::vector<Result> results;
    {
      HostMaskTensors h = encode_dense(s, bits);
      results.push_back(run(h, warmup, runs, stream));
    }
    {
      HostMaskTensors h = encode_csr(s, bits);
      results.push_back(run(h, warmup, runs, stream));
    }
    {
      HostMaskTensors h = encode_index_lists(s, bits, 0, &g);
      results.push_back(run(h, warmup, runs, stream));
    }
    TESSERA_CUDA_CHECK(cudaStreamDestroy(stream));

    std::printf("mask state, Wan2.1 720p: B_m=1 H_m=40 n_qb=n_kvb=1182 (%s), median of %d runs after %d warm-up\n",
                prop.name, runs, warmup);
    std::printf("%-12s %10s %14s %12s %14s\n", "format", "nnz", "events (us)", "min (us)", "wall (us)");
    nlohmann::json j;
    j["benchmark"] = "mask_state";
    j["command"] = command;
    j["git_revision"] = git_revision();
    j["gpu"] = prop.name;
    j["case"] = {{"name", "wan2.1-720p"}, {"batch", s.batch}, {"heads", s.heads}, {"n_qb", s.n_qb},
                 {"n_kvb", s.n_kvb}, {"block", 64}, {"tokens", 75600}, {"pattern", "runs"}, {"density_target", 0.1}};
    j["runs"] = runs;
    j["warmup"] = warmup;
    j["timing"] = "CUDA events around the whole build_mask_state_gpu() call (includes its one host synchronization)";
    for (const Result& r : results) {
      std::printf("%-12s %10lld %14.1f %12.1f %14.1f\n", r.format.c_str(), static_cast<long long>(r.nnz), r.event_us,
                  r.min_event_us, r.wall_us);
      j["results"].push_back({{"format", r.format}, {"nnz", r.nnz}, {"median_event_us", r.event_us},
                              {"min_event_us", r.min_event_us}, {"median_wall_us", r.wall_us}});
    }
    std::filesystem::create_directories(out_dir);
    const auto path = std::filesystem::path(out_dir) / "bench_mask_state.json";
    std::ofstream(path) << j.dump(2) << "\n";
    std::printf("wrote %s\n", path.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_mask_state: %s\n", e.what());
    return 1;
  }
  return 0;
}
