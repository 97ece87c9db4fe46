// Benchmark of the mma.sync family's plans on the h200_baselines.md setups (B=1, H=16, N=32768, D=128, bf16,
// band + random block masks per family; Wan2.1 720p: N=75600, H=40, B=(64,64)). For each family it times every
// candidate plan (CUDA events, median of 7 after 2 warm-ups; --reps), keeps the best, and writes q/k/v, the block mask
// and the best plan's O to --data (raw files for bench/flex_vs_tessera.py) and the timings to
// --out/tessera_mma_bench.json.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <regex>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/launch_prep_rules.hpp"
#include "cuda/check.cuh"
#include "kernel_plan_builder.hpp"
#include "kernel_runner.hpp"
#include "kernels/launch.hpp"
#include "tessera/cuda_types.hpp"

using namespace tessera;
using namespace tessera::testing;

namespace {

__global__ void fill_normal_bf16(__nv_bfloat16* x, std::int64_t n, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x) {
    std::uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    h ^= h >> 31, h *= 0xBF58476D1CE4E5B9ull, h ^= h >> 29, h *= 0x94D049BB133111EBull, h ^= h >> 32;
    const float u1 = (float((h >> 40) & 0xffffff) + 1.f) / 16777217.f, u2 = float(h & 0xffffff) / 16777216.f;
    x[i] = __float2bfloat16(sqrtf(-2.f * logf(u1)) * cospif(2.f * u2));
  }
}

struct Candidate { std::string label, entry; int tq, tkv; bool packed, membership; bool persistent = false; };
struct Family { std::string name; int bq, bkv; double density; MaskKind kind; std::vector<Candidate> cands; };

void write_file(const std::string& path, const void* data, std::size_t bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(static_cast<const char*>(data), std::streamsize(bytes));
  if (!f) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  std::string out = ".", data = "/tmp/tessera_bench", only;
  bool wan = true;
  bool persistent = false;  // --persistent
  bool longest_first = true;  // --persistent-order longest|natural
  std::regex entries(".*");  // --entries: time only the candidates whose catalog entry matches (e.g. "^wgmma\\.")
  int reps = 7, warmups = 2;
  bool flush_l2 = false;  // --flush-l2
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) out = argv[++i];
    else if (a == "--entries" && i + 1 < argc) entries = std::regex(argv[++i]);
    else if (a == "--data" && i + 1 < argc) data = argv[++i];
    else if (a == "--no-wan") wan = false;
    else if (a == "--persistent") persistent = true;
    else if (a == "--flush-l2") flush_l2 = true;
    else if (a == "--persistent-order" && i + 1 < argc) longest_first = std::string(argv[++i]) != "natural";
    else if (a == "--families" && i + 1 < argc) only = "," + std::string(argv[++i]) + ",";
    else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i])), warmups = reps >= 3 ? 2 : 0;
    else {
      std::fprintf(stderr, "bench_mma_attention: unknown or incomplete argument '%s'\n"
                           "usage: bench_mma_attention [--out DIR] [--data DIR] [--no-wan] [--entries REGEX] [--families F1,F2,...] [--reps N] [--persistent]\n"
                           "  [--persistent-order longest|natural] [--flush-l2]\n"
                           "  --flush-l2: zero a 256 MiB buffer before every timed run, outside the events, as the peer scoreboard\n"
                           "  does (bench/peers/README.md), so that its figures and these compare (default: runs back to back)\n"
                           "  --families: only these families (e.g. Q16K16,Q32K32); --reps: timed runs per candidate (7;\n"
                           "  below 3 also no warm-up runs: for profilers); --persistent: also time each candidate whose entry\n"
                           "  runs persistent CTAs that way (label + \".p\"; work items longest first, as the runtime's g1p plans,\n"
                           "  or with --persistent-order natural in the list's own order: head by head, query tile by tile)\n",
                   a.c_str());
      return 2;
    }
  }
  if (cuda_device_count() == 0) {
    std::fprintf(stderr, "bench_mma_attention: no CUDA device\n");
    return 1;
  }
  std::filesystem::create_directories(data);
  nlohmann::json result;
  cudaDeviceProp prop{};
  TESSERA_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  result["gpu"] = prop.name;
  result["geometries"] = nlohmann::json::array();
  result["l2_flush"] = flush_l2;
  // The L2 flush buffer (bench/peers/gpu.py's protocol: 256 MiB zeroed before each timed run, outside the events).
  DeviceBuffer flush_buf(flush_l2 ? std::size_t(256) << 20 : 0);

  auto C = [](std::string l, std::string e, int tq, int tkv, bool packed, bool mem) { return Candidate{l, e, tq, tkv, packed, mem}; };
  const std::string P = "mma.bf16.d128.", W = "wgmma.bf16.d128.";
  std::vector<Family> fams = {
      {"Q16K16", 16, 16, 0.098, MaskKind::kBandRandom,
       {C("q16d.kv16p4.wgs", W + "t16x64.w8.s2", 16, 64, true, true), C("q16d.kv16c4.wgs", W + "t16x64.w8.s2", 16, 64, false, true), C("q16c2.kv16p4.wgs", W + "t32x64.w8.s2", 32, 64, true, true),
        C("q64c4.kv64p4.wg", W + "t64x64.w8.s2", 64, 64, true, true), C("q64c4.kv128p8.wg.s1", W + "t64x128.w8.s1", 64, 128, true, true), C("q128c8.kv128p8.wg", W + "t128x128.w12.s2", 128, 128, true, true), C("q16d.kv16d", P + "t16x16.w1.s2", 16, 16, false, false), C("q16d.kv32p2", P + "t16x32.w2.s2", 16, 32, true, true),
        C("q16d.kv64p4", P + "t16x64.w4.s2", 16, 64, true, true), C("q16d.kv64p4.s1", P + "t16x64.w4.s1", 16, 64, true, true),
        C("q16d.kv128p8", P + "t16x128.w4.s1", 16, 128, true, true), C("q32c2.kv64p4", P + "t32x64.w4.s2", 32, 64, true, true),
        C("q32c2.kv32p2", P + "t32x32.w2.s2", 32, 32, true, true), C("q64c4.kv32p2", P + "t64x32.w4.s2", 64, 32, true, true),
        C("q64c4.kv64p4", P + "t64x64.w4.s2", 64, 64, true, true)}},
      {"Q32K16", 32, 16, 0.098, MaskKind::kBandRandom,
       {C("q32d.kv16p4.wgs", W + "t32x64.w8.s2", 32, 64, true, true), C("q32d.kv16c4.wgs", W + "t32x64.w8.s2", 32, 64, false, true), C("q16r2.kv16p4.wgs", W + "t16x64.w8.s2", 16, 64, true, true),
        C("q64c2.kv64p4.wg", W + "t64x64.w8.s2", 64, 64, true, true), C("q64c2.kv128p8.wg.s1", W + "t64x128.w8.s1", 64, 128, true, true), C("q128c4.kv128p8.wg", W + "t128x128.w12.s2", 128, 128, true, true), C("q32d.kv32p2", P + "t32x32.w2.s2", 32, 32, true, true), C("q32d.kv64p4", P + "t32x64.w4.s2", 32, 64, true, true),
        C("q32d.kv128p8", P + "t32x128.w8.s1", 32, 128, true, true), C("q16r2.kv64p4", P + "t16x64.w4.s2", 16, 64, true, true),
        C("q16r2.kv64p4.s1", P + "t16x64.w4.s1", 16, 64, true, true), C("q64c2.kv64p4", P + "t64x64.w4.s2", 64, 64, true, true),
        C("q64c2.kv32p2", P + "t64x32.w4.s2", 64, 32, true, true)}},
      {"Q32K32", 32, 32, 0.097, MaskKind::kBandRandom,
       {C("q32d.kv32p2.wgs", W + "t32x64.w8.s2", 32, 64, true, true), C("q32d.kv32c2.wgs", W + "t32x64.w8.s2", 32, 64, false, true), C("q16r2.kv32p2.wgs", W + "t16x64.w8.s2", 16, 64, true, true),
        C("q64c2.kv64p2.wg", W + "t64x64.w8.s2", 64, 64, true, true), C("q64c2.kv128p4.wg.s1", W + "t64x128.w8.s1", 64, 128, true, true), C("q128c4.kv128p4.wg", W + "t128x128.w12.s2", 128, 128, true, true), C("q32d.kv32d", P + "t32x32.w2.s2", 32, 32, false, false), C("q32d.kv64p2", P + "t32x64.w4.s2", 32, 64, true, true),
        C("q32d.kv128p4", P + "t32x128.w8.s1", 32, 128, true, true), C("q16r2.kv64p2", P + "t16x64.w4.s2", 16, 64, true, true),
        C("q64c2.kv32d", P + "t64x32.w4.s2", 64, 32, false, true), C("q64c2.kv64p2", P + "t64x64.w4.s2", 64, 64, true, true)}},
      {"Q64K32", 64, 32, 0.097, MaskKind::kBandRandom,
       {C("q64d.kv64p2.wg", W + "t64x64.w8.s2", 64, 64, true, true), C("q64d.kv128p4.wg", W + "t64x128.w8.s2", 64, 128, true, true), C("q64d.kv128p4.wg.s1", W + "t64x128.w8.s1", 64, 128, true, true), C("q128c2.kv128p4.wg", W + "t128x128.w12.s2", 128, 128, true, true), C("q64d.kv32d", P + "t64x32.w4.s2", 64, 32, false, false), C("q64d.kv64p2", P + "t64x64.w4.s2", 64, 64, true, true),
        C("q64d.kv64p2.s3", P + "t64x64.w4.s3", 64, 64, true, true), C("q64d.kv128p4", P + "t64x128.w4.s1", 64, 128, true, true),
        C("q32r2.kv64p2", P + "t32x64.w4.s2", 32, 64, true, true), C("q32r2.kv128p4", P + "t32x128.w8.s1", 32, 128, true, true)}},
      {"Q64K64-HD", 64, 64, 0.050, MaskKind::kBandRandom,
       {C("q64d.kv64d.wg", W + "t64x64.w8.s2", 64, 64, false, false), C("q64d.kv128p2.wg", W + "t64x128.w8.s2", 64, 128, true, true), C("q64d.kv128p2.wg.s1", W + "t64x128.w8.s1", 64, 128, true, true), C("q128c2.kv64d.wg", W + "t128x64.w12.s2", 128, 64, false, true), C("q128c2.kv64d.wg.s4", W + "t128x64.w12.s4", 128, 64, false, true), C("q128c2.kv128p2.wg", W + "t128x128.w12.s2", 128, 128, true, true), C("q64d.kv64d", P + "t64x64.w4.s2", 64, 64, false, false), C("q64d.kv64d.s3", P + "t64x64.w4.s3", 64, 64, false, false),
        C("q64d.kv128p2", P + "t64x128.w4.s1", 64, 128, true, true), C("q32r2.kv64d", P + "t32x64.w4.s2", 32, 64, false, false),
        C("q128c2.kv64d", P + "t128x64.w4.s2", 128, 64, false, true), C("q128c2.kv64d.w8", P + "t128x64.w8.s2", 128, 64, false, true)}},
      {"Q64K64", 64, 64, 0.097, MaskKind::kBandRandom,
       {C("q64d.kv64d.wg", W + "t64x64.w8.s2", 64, 64, false, false), C("q64d.kv128p2.wg", W + "t64x128.w8.s2", 64, 128, true, true), C("q64d.kv128p2.wg.s1", W + "t64x128.w8.s1", 64, 128, true, true), C("q128c2.kv64d.wg", W + "t128x64.w12.s2", 128, 64, false, true), C("q128c2.kv64d.wg.s4", W + "t128x64.w12.s4", 128, 64, false, true), C("q128c2.kv128p2.wg", W + "t128x128.w12.s2", 128, 128, true, true), C("q64d.kv64d", P + "t64x64.w4.s2", 64, 64, false, false), C("q64d.kv64d.s3", P + "t64x64.w4.s3", 64, 64, false, false),
        C("q64d.kv128p2", P + "t64x128.w4.s1", 64, 128, true, true), C("q32r2.kv64d", P + "t32x64.w4.s2", 32, 64, false, false),
        C("q128c2.kv64d", P + "t128x64.w4.s2", 128, 64, false, true), C("q128c2.kv64d.w8", P + "t128x64.w8.s2", 128, 64, false, true)}},
      {"Q64K64-DD", 64, 64, 0.189, MaskKind::kBandRandom,
       {C("q64d.kv64d.wg", W + "t64x64.w8.s2", 64, 64, false, false), C("q64d.kv128p2.wg", W + "t64x128.w8.s2", 64, 128, true, true), C("q64d.kv128p2.wg.s1", W + "t64x128.w8.s1", 64, 128, true, true), C("q128c2.kv64d.wg", W + "t128x64.w12.s2", 128, 64, false, true), C("q128c2.kv64d.wg.s4", W + "t128x64.w12.s4", 128, 64, false, true), C("q128c2.kv128p2.wg", W + "t128x128.w12.s2", 128, 128, true, true), C("q64d.kv64d", P + "t64x64.w4.s2", 64, 64, false, false), C("q64d.kv64d.s3", P + "t64x64.w4.s3", 64, 64, false, false),
        C("q64d.kv128p2", P + "t64x128.w4.s1", 64, 128, true, true), C("q32r2.kv64d", P + "t32x64.w4.s2", 32, 64, false, false),
        C("q128c2.kv64d", P + "t128x64.w4.s2", 128, 64, false, true), C("q128c2.kv64d.w8", P + "t128x64.w8.s2", 128, 64, false, true)}},
      {"Q128K64", 128, 64, 0.097, MaskKind::kBandRandom,
       {C("q128d.kv64d.wg", W + "t128x64.w12.s2", 128, 64, false, false), C("q128d.kv64d.wg.s4", W + "t128x64.w12.s4", 128, 64, false, false), C("q128d.kv128p2.wg", W + "t128x128.w12.s2", 128, 128, true, true), C("q128d.kv64d.w4", P + "t128x64.w4.s2", 128, 64, false, false), C("q128d.kv64d.w8", P + "t128x64.w8.s2", 128, 64, false, false),
        C("q128d.kv128p2", P + "t128x128.w8.s2", 128, 128, true, true), C("q64r2.kv64d", P + "t64x64.w4.s2", 64, 64, false, false)}},
      {"Q128K128", 128, 128, 0.099, MaskKind::kBandRandom,
       {C("q128d.kv128d.wg", W + "t128x128.w12.s2", 128, 128, false, false), C("q128d.kv64r2.wg", W + "t128x64.w12.s2", 128, 64, false, false), C("q128d.kv128d", P + "t128x128.w8.s2", 128, 128, false, false), C("q128d.kv64r2.w4", P + "t128x64.w4.s2", 128, 64, false, false),
        C("q128d.kv64r2.w8", P + "t128x64.w8.s2", 128, 64, false, false)}},
      {"Dense", 128, 128, 1.0, MaskKind::kDense,
       {C("q128d.kv128d.wg", W + "t128x128.w12.s2", 128, 128, false, false), C("q128d.kv64r2.w4", P + "t128x64.w4.s2", 128, 64, false, false), C("q128d.kv64r2.w8", P + "t128x64.w8.s2", 128, 64, false, false),
        C("q128d.kv128d", P + "t128x128.w8.s2", 128, 128, false, false)}},
  };
  std::vector<Family> wan_fams = {
      {"Wan720p-Q64K64", 64, 64, 0.100, MaskKind::kBandRandom,
       {C("q64d.kv64d.wg", W + "t64x64.w8.s2", 64, 64, false, false), C("q64d.kv128p2.wg", W + "t64x128.w8.s2", 64, 128, true, true), C("q64d.kv128p2.wg.s1", W + "t64x128.w8.s1", 64, 128, true, true), C("q128c2.kv64d.wg", W + "t128x64.w12.s2", 128, 64, false, true), C("q128c2.kv64d.wg.s4", W + "t128x64.w12.s4", 128, 64, false, true), C("q128c2.kv128p2.wg", W + "t128x128.w12.s2", 128, 128, true, true), C("q64d.kv64d", P + "t64x64.w4.s2", 64, 64, false, false), C("q64d.kv64d.s3", P + "t64x64.w4.s3", 64, 64, false, false),
        C("q32r2.kv64d", P + "t32x64.w4.s2", 32, 64, false, false), C("q128c2.kv64d", P + "t128x64.w4.s2", 128, 64, false, true)}},
      // top 10 % of a distance-decaying noisy score field per row (the scoreboard's Wan720-topk recipe): neighbouring
      // query blocks share most kv blocks, which the Coarsened-Q wgmma tiles load once for both.
      {"Wan720p-topk", 64, 64, 0.100, MaskKind::kTopK,
       {C("q64d.kv64d.wg", W + "t64x64.w8.s2", 64, 64, false, false), C("q64d.kv128p2.wg.s1", W + "t64x128.w8.s1", 64, 128, true, true),
        C("q128c2.kv64d.wg", W + "t128x64.w12.s2", 128, 64, false, true), C("q128c2.kv64d.wg.s4", W + "t128x64.w12.s4", 128, 64, false, true),
        C("q128c2.kv128p2.wg", W + "t128x128.w12.s2", 128, 128, true, true), C("q64d.kv64d", P + "t64x64.w4.s2", 64, 64, false, false)}}};

  struct Geo { std::string name; int b, n, h, d; std::vector<Family>* fams; };
  std::vector<Geo> geos = {{"baseline_N32768_H16", 1, 32768, 16, 128, &fams}};
  if (wan) geos.push_back({"wan21_720p_N75600_H40", 1, 75600, 40, 128, &wan_fams});

  cudaEvent_t e0, e1;
  TESSERA_CUDA_CHECK(cudaEventCreate(&e0));
  TESSERA_CUDA_CHECK(cudaEventCreate(&e1));
  if (persistent) {  // each candidate on an entry with persistent CTAs, then the same plan with them
    for (std::vector<Family>* fs : {&fams, &wan_fams})
      for (Family& f : *fs) {
        std::vector<Candidate> all;
        for (const Candidate& c : f.cands) {
          all.push_back(c);
          const kernels::CompiledEntry* ce = kernels::find_compiled_entry(c.entry);
          if (ce && ce->persistent_ctas) {
            all.push_back(c);
            all.back().label += ".p", all.back().persistent = true;
          }
        }
        f.cands = std::move(all);
      }
  }
  for (const Geo& g : geos) {
    const std::int64_t numel = std::int64_t(g.b) * g.n * g.h * g.d;
    DeviceBuffer q(numel * 2), k(numel * 2), v(numel * 2), o(numel * 2), lse(std::int64_t(g.b) * g.h * g.n * 4);
    fill_normal_bf16<<<1024, 256>>>(q.as<__nv_bfloat16>(), numel, 11);
    fill_normal_bf16<<<1024, 256>>>(k.as<__nv_bfloat16>(), numel, 22);
    fill_normal_bf16<<<1024, 256>>>(v.as<__nv_bfloat16>(), numel, 33);
    TESSERA_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<unsigned char> host(numel * 2);
    const std::string gdir = data + "/" + g.name;
    std::filesystem::create_directories(gdir);
    for (auto [name, buf] : {std::pair<const char*, DeviceBuffer*>{"q", &q}, {"k", &k}, {"v", &v}}) {
      TESSERA_CUDA_CHECK(cudaMemcpy(host.data(), buf->data(), host.size(), cudaMemcpyDeviceToHost));
      write_file(gdir + "/" + name + ".bf16", host.data(), host.size());
    }
    nlohmann::json gj = {{"name", g.name}, {"batch", g.b}, {"n", g.n}, {"heads", g.h}, {"head_dim", g.d},
                         {"dtype", "bf16"}, {"layout", "BSHD"}, {"families", nlohmann::json::array()}};
    for (const Family& f : *g.fams) {
      if (!only.empty() && only.find("," + f.name + ",") == std::string::npos) continue;
      const int n_qb = (g.n + f.bq - 1) / f.bq, n_kvb = (g.n + f.bkv - 1) / f.bkv;
      const BlockMask m = make_mask(g.b, g.h, n_qb, n_kvb, f.kind, f.density, 1234);
      write_file(gdir + "/mask_" + f.name + ".u8", m.bits.data(), m.bits.size());
      kernels::AttentionParams prm;
      prm.dtype = DType::kBFloat16;
      prm.q = q.data(), prm.k = k.data(), prm.v = v.data(), prm.o = o.data(), prm.lse = lse.as<float>();
      const std::int64_t sb = std::int64_t(g.n) * g.h * g.d, sn = std::int64_t(g.h) * g.d, sh = g.d;
      prm.q_stride_b = prm.k_stride_b = prm.v_stride_b = prm.o_stride_b = sb;
      prm.q_stride_n = prm.k_stride_n = prm.v_stride_n = prm.o_stride_n = sn;
      prm.q_stride_h = prm.k_stride_h = prm.v_stride_h = prm.o_stride_h = sh;
      prm.lse_stride_b = std::int64_t(g.h) * g.n, prm.lse_stride_h = g.n;
      prm.batch = g.b, prm.n_q = prm.n_kv = g.n, prm.h_q = prm.h_kv = g.h, prm.head_dim = g.d;
      prm.block_q = f.bq, prm.block_kv = f.bkv, prm.scale = 1.f / std::sqrt(float(g.d));
      nlohmann::json fj = {{"family", f.name}, {"block_q", f.bq}, {"block_kv", f.bkv}, {"mask", "band+random"},
                           {"target_density", f.density}, {"candidates", nlohmann::json::array()}};
      double best = 1e30;
      std::size_t best_i = 0;
      std::int64_t active_pairs = 0;
      std::int64_t active_blocks = 0;
      for (auto x : m.bits) active_blocks += x;
      fj["density"] = double(active_blocks) / double(m.bits.size());
      for (std::size_t ci = 0; ci < f.cands.size() + 1; ++ci) {
        // last pass: rerun the best candidate once to leave its O in `o`
        const Candidate& c = f.cands[ci < f.cands.size() ? ci : best_i];
        if (ci < f.cands.size() && !std::regex_search(c.entry, entries)) continue;
        if (!kernels::find_compiled_entry(c.entry)) { fj["candidates"].push_back({{"plan", c.label}, {"entry", c.entry}, {"error", "not compiled"}}); continue; }
        MappingSpec spec{c.tq, c.tkv, c.packed, c.membership, 1};
        HostPlan hp = build_plan(m, g.n, g.n, f.bq, f.bkv, spec);
        if (c.persistent && longest_first)  // launch preparation's order of a persistent plan's list (its sort key)
          std::stable_sort(hp.items.begin(), hp.items.end(), [](const WorkItem& a, const WorkItem& b) {
            return prep::persistent_key(a) < prep::persistent_key(b);
          });
        active_pairs = hp.active_pairs;
        DevicePlan dp(hp, c.tq, g.d);
        dp.set_persistent(c.persistent);
        try {
          if (ci == f.cands.size()) { run_plan(c.entry, c.packed, c.membership, dp, prm); break; }
          for (int w = 0; w < warmups; ++w) run_plan(c.entry, c.packed, c.membership, dp, prm);
          std::vector<float> ts;
          for (int r = 0; r < reps; ++r) {
            if (flush_l2) TESSERA_CUDA_CHECK(cudaMemsetAsync(flush_buf.data(), 0, flush_buf.bytes()));
            TESSERA_CUDA_CHECK(cudaEventRecord(e0));
            run_plan(c.entry, c.packed, c.membership, dp, prm);
            TESSERA_CUDA_CHECK(cudaEventRecord(e1));
            TESSERA_CUDA_CHECK(cudaEventSynchronize(e1));
            float ms = 0;
            TESSERA_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
            ts.push_back(ms);
          }
          std::sort(ts.begin(), ts.end());
          const double med = ts[ts.size() / 2];
          fj["candidates"].push_back({{"plan", c.label}, {"entry", c.entry}, {"packed", c.packed}, {"ms", med},
                                      {"tflops", 4.0 * g.d * double(hp.active_pairs) / (med * 1e-3) / 1e12},
                                      {"work_items", hp.items.size()}, {"entries", hp.kv_tile.size()},
                                      {"persistent", c.persistent}});
          std::printf("%s %-10s %-18s %-34s %8.3f ms %6.1f TFLOP/s\n", g.name.c_str(), f.name.c_str(), c.label.c_str(),
                      c.entry.c_str(), med, 4.0 * g.d * double(hp.active_pairs) / (med * 1e-3) / 1e12);
          if (med < best) best = med, best_i = ci;
        } catch (const std::exception& ex) {
          fj["candidates"].push_back({{"plan", c.label}, {"entry", c.entry}, {"error", ex.what()}});
          std::printf("%s %s %s: %s\n", g.name.c_str(), f.name.c_str(), c.label.c_str(), ex.what());
        }
      }
      TESSERA_CUDA_CHECK(cudaDeviceSynchronize());
      TESSERA_CUDA_CHECK(cudaMemcpy(host.data(), o.data(), host.size(), cudaMemcpyDeviceToHost));
      write_file(gdir + "/o_" + f.name + ".bf16", host.data(), host.size());
      fj["active_pairs"] = active_pairs;
      fj["best_plan"] = f.cands[best_i].label;
      fj["best_entry"] = f.cands[best_i].entry;
      fj["tessera_ms"] = best;
      fj["tessera_tflops"] = 4.0 * g.d * double(active_pairs) / (best * 1e-3) / 1e12;
      gj["families"].push_back(fj);
    }
    result["geometries"].push_back(gj);
  }
  std::ofstream(out + "/tessera_mma_bench.json") << result.dump(2);
  return 0;
}
