// Benchmark of build_mask_state_gpu() on the Wan2.1 720p case (N = 75,600 tokens, 64 x 64 blocks -> n_qb = n_kvb =
// 1182, 40 heads, ~10% density in runs, ~5.6M active blocks), one row per input format (dense u8, block-CSR, index
// lists with unsorted rows) and per mode: speculative pass 2 (the default) and pass 2 after the host has read the
// counters (the earlier sequence), each without and with the coarsened-pair count ("+pairs": the features
// coarsen_cost2/4/8, which Runtime::run counts only for a key whose tree reads them; the counters then follow pass 2
// and the count). Each format's input is held in 4 copies used in turn, so that repeated calls do
// not run from L2. A 20 ms busy kernel ramps the SM clock, and a 300 us busy kernel precedes every sample (the
// GPU is warm, as after the QKV GEMMs of a layer). Three timings, each the median of --runs calls after a warm-up:
//   e2e:    CUDA events around the whole call (with its host wait for the counters), and host wall clock;
//   stages: CUDA events recorded by the call itself at its stage boundaries (MaskStateWorkspace::Impl::stage_events):
//           pass 1 (with the counters' memset), scan, counters copy, pass 2 (without speculation this last one
//           includes the host round trip), each from the boundary just before it in stream order (with "+pairs" the
//           counters column holds the count and the copy, after pass 2); gpu = start to the last boundary.
// The floor is the fewest bytes each format must move (input read once, mu(M) written once) over the measured
// device copy bandwidth (cudaMemcpy device to device of 1 GiB, read + write bytes).
// Output: a table on stdout and bench_mask_state.json in --out DIR (default ".").
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
#include "cuda/mask_state_workspace.hpp"
#include "gpu_busy.cuh"
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

using Stage = MaskStateWorkspace::Impl::Stage;
constexpr int kCopies = 4;
constexpr const char* kStageNames[] = {"pass1", "scan", "counters", "pass2"};

struct Result {
  std::string format, mode;
  std::int64_t nnz = 0;
  double min_bytes = 0;
  double event_us = 0, wall_us = 0, min_event_us = 0;
  double stage_us[4] = {0, 0, 0, 0};
  double gpu_us = 0;
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

/// Fewest bytes a format must move: the input read once, row_offsets and col_indices written once.
double min_bytes(const BlockMask& m, std::int64_t nnz) {
  const double out = 4.0 * static_cast<double>(m.rows() + 1) + 4.0 * static_cast<double>(nnz);
  switch (m.format) {
    case MaskFormat::kDense:
      return static_cast<double>(m.rows() * m.n_kvb) + out;
    case MaskFormat::kBlockCsr:
      return 2 * out;
    case MaskFormat::kIndexLists:
      return 4.0 * static_cast<double>(m.rows()) + 4.0 * static_cast<double>(nnz) + out;
  }
  return out;
}

Result run(HostMaskTensors& h, int warmup, int runs, cudaStream_t stream, bool speculative, bool coarsen) {
  DeviceBuffer bufs[kCopies][2];
  BlockMask masks[kCopies];
  for (int i = 0; i < kCopies; ++i) masks[i] = upload(h, bufs[i]);
  MaskStateWorkspace ws;
  ws.impl().speculative_pass2 = speculative;
  ws.impl().count_coarsened = coarsen;
  DeviceMaskState out;
  cudaEvent_t start, stop, stages[Stage::kStages];
  TESSERA_CUDA_CHECK(cudaEventCreate(&start));
  TESSERA_CUDA_CHECK(cudaEventCreate(&stop));
  for (auto& e : stages) TESSERA_CUDA_CHECK(cudaEventCreate(&e));
  for (int i = 0; i < warmup; ++i) build_mask_state_gpu(masks[i % kCopies], stream, ws, out);
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream));
  // End to end: events around the call, no stage events.
  std::vector<double> ev, wall;
  bench::keep_gpu_busy(stream, 20000.0);  // ramp the clock; then a busy kernel before every sample keeps it warm
  for (int i = 0; i < runs; ++i) {
    bench::keep_gpu_busy(stream, 300.0);
    const auto t0 = std::chrono::steady_clock::now();
    TESSERA_CUDA_CHECK(cudaEventRecord(start, stream));
    build_mask_state_gpu(masks[i % kCopies], stream, ws, out);
    TESSERA_CUDA_CHECK(cudaEventRecord(stop, stream));
    TESSERA_CUDA_CHECK(cudaEventSynchronize(stop));
    const auto t1 = std::chrono::steady_clock::now();
    float ms = 0;
    TESSERA_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    ev.push_back(ms * 1e3);
    wall.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  // Stages: the call records its own stage boundaries.
  ws.impl().stage_events = stages;
  std::vector<double> st[4], gpu;
  for (int i = 0; i < runs; ++i) {
    bench::keep_gpu_busy(stream, 300.0);
    build_mask_state_gpu(masks[i % kCopies], stream, ws, out);
    TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream));
    // Each boundary's time from the start; a stage lasts from the boundary recorded just before it in stream order
    // (the counters follow pass 2 and the coarsened-pair count when those are counted, precede pass 2 when not).
    double t[Stage::kStages] = {0};
    for (int k = 1; k < Stage::kStages; ++k) {
      float ms = 0;
      TESSERA_CUDA_CHECK(cudaEventElapsedTime(&ms, stages[Stage::kStart], stages[k]));
      t[k] = ms * 1e3;
    }
    const bool counters_last = t[Stage::kCounters] >= t[Stage::kPass2];
    st[0].push_back(t[Stage::kPass1]);
    st[1].push_back(t[Stage::kScan] - t[Stage::kPass1]);
    st[2].push_back(t[Stage::kCounters] - (counters_last ? t[Stage::kPass2] : t[Stage::kScan]));
    st[3].push_back(t[Stage::kPass2] - (counters_last ? t[Stage::kScan] : t[Stage::kCounters]));
    gpu.push_back(std::max(t[Stage::kCounters], t[Stage::kPass2]));
  }
  ws.impl().stage_events = nullptr;
  TESSERA_CUDA_CHECK(cudaEventDestroy(start));
  TESSERA_CUDA_CHECK(cudaEventDestroy(stop));
  for (auto& e : stages) TESSERA_CUDA_CHECK(cudaEventDestroy(e));
  Result r;
  r.format = mask_format_name(masks[0].format);
  r.mode = std::string(speculative ? "speculative" : "after-sync") + (coarsen ? "+pairs" : "");
  r.nnz = out.nnz;
  r.min_bytes = min_bytes(masks[0], out.nnz);
  r.event_us = median(ev);
  r.min_event_us = *std::min_element(ev.begin(), ev.end());
  r.wall_us = median(wall);
  for (int k = 0; k < 4; ++k) r.stage_us[k] = median(st[k]);
  r.gpu_us = median(gpu);
  return r;
}

/// Device copy bandwidth (bytes read + written per second) of cudaMemcpy device to device, 1 GiB, median of 10.
double copy_bandwidth(cudaStream_t stream) {
  const std::size_t bytes = std::size_t{1} << 30;
  DeviceBuffer a(bytes), b(bytes);
  TESSERA_CUDA_CHECK(cudaMemsetAsync(a.data(), 0x5a, bytes, stream));
  cudaEvent_t e0, e1;
  TESSERA_CUDA_CHECK(cudaEventCreate(&e0));
  TESSERA_CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<double> t;
  for (int i = 0; i < 12; ++i) {
    TESSERA_CUDA_CHECK(cudaEventRecord(e0, stream));
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, stream));
    TESSERA_CUDA_CHECK(cudaEventRecord(e1, stream));
    TESSERA_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    TESSERA_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (i >= 2) t.push_back(ms * 1e-3);
  }
  TESSERA_CUDA_CHECK(cudaEventDestroy(e0));
  TESSERA_CUDA_CHECK(cudaEventDestroy(e1));
  return 2.0 * static_cast<double>(bytes) / median(t);
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
    const double bw = copy_bandwidth(stream);
    std::vector<Result> results;
    for (bool coarsen : {false, true})
      for (bool speculative : {true, false}) {
        {
          HostMaskTensors h = encode_dense(s, bits);
          results.push_back(run(h, warmup, runs, stream, speculative, coarsen));
        }
        {
          HostMaskTensors h = encode_csr(s, bits);
          results.push_back(run(h, warmup, runs, stream, speculative, coarsen));
        }
        {
          std::mt19937_64 gl(721);
          HostMaskTensors h = encode_index_lists(s, bits, 0, &gl);
          results.push_back(run(h, warmup, runs, stream, speculative, coarsen));
        }
      }
    TESSERA_CUDA_CHECK(cudaStreamDestroy(stream));

    std::printf("mask state, Wan2.1 720p: B_m=1 H_m=40 n_qb=n_kvb=1182 (%s), median of %d runs after %d warm-up, "
                "%d input copies in turn; device copy bandwidth %.2f TB/s\n",
                prop.name, runs, warmup, kCopies, bw * 1e-12);
    std::printf("%-11s %-17s %8s %6s | %8s %8s | %6s %6s %8s %6s | %7s %6s\n", "format", "mode", "nnz", "floor",
                "e2e ev", "wall", "pass1", "scan", "counters", "pass2", "gpu", "x flr");
    nlohmann::json j;
    j["benchmark"] = "mask_state";
    j["command"] = command;
    j["git_revision"] = git_revision();
    j["gpu"] = prop.name;
    j["case"] = {{"name", "wan2.1-720p"}, {"batch", s.batch}, {"heads", s.heads}, {"n_qb", s.n_qb},
                 {"n_kvb", s.n_kvb}, {"block", 64}, {"tokens", 75600}, {"pattern", "runs"}, {"density_target", 0.1}};
    j["runs"] = runs;
    j["warmup"] = warmup;
    j["input_copies"] = kCopies;
    j["copy_bandwidth_tb_s"] = bw * 1e-12;
    j["timing"] =
        "e2e: CUDA events around the whole build_mask_state_gpu() call (includes its host wait for the counters) and "
        "host wall clock; stages: CUDA events recorded by the call at its stage boundaries (pass2 after-sync includes "
        "the host round trip); gpu: start of pass 1 to end of pass 2; floor: min bytes / copy bandwidth";
    for (const Result& r : results) {
      const double floor_us = r.min_bytes / bw * 1e6;
      std::printf("%-11s %-17s %8lld %6.1f | %8.1f %8.1f | %6.1f %6.1f %8.1f %6.1f | %7.1f %6.2f\n", r.format.c_str(),
                  r.mode.c_str(), static_cast<long long>(r.nnz), floor_us, r.event_us, r.wall_us, r.stage_us[0],
                  r.stage_us[1], r.stage_us[2], r.stage_us[3], r.gpu_us, r.gpu_us / floor_us);
      nlohmann::json stages;
      for (int k = 0; k < 4; ++k) stages[kStageNames[k]] = r.stage_us[k];
      j["results"].push_back({{"format", r.format}, {"mode", r.mode}, {"nnz", r.nnz}, {"min_bytes", r.min_bytes},
                              {"floor_us", floor_us}, {"median_event_us", r.event_us},
                              {"min_event_us", r.min_event_us}, {"median_wall_us", r.wall_us},
                              {"median_stage_us", stages}, {"median_gpu_us", r.gpu_us}});
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
