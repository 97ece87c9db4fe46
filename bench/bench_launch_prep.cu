// Launch-preparation benchmark (H200): GPU time per request of prepare_plan_gpu for a Wan2.1 720p mask
// (N = 75,600 tokens, B_Q = B_KV = 64 -> 1,182 x 1,182 blocks, 40 heads, 10% density) for each mapping and a few
// organizations. CUDA-event median over >= 50 runs of the enqueued builders, two ways: gpu_us with a 300 us busy
// kernel enqueued first (warm clock, as after the QKV GEMMs of a layer; the launches are enqueued while the GPU is
// busy, so host launch gaps drop out), and idle_us right after a host synchronisation (idle clock possible, launch
// gaps included). Plus the host wall time of the whole call (enqueue + totals copy + sync). The warm samples also
// split the GPU time at an event between the tile-row builders (rows_us, with the buffers' growth and memsets)
// and the work-item builders (items_us). Preparation runs as the Runtime runs it (implicit_items = true: unsplit,
// non-persistent plans build no work-item list, items_us ~ 0); --explicit-items builds the list for every plan.
// --row-builder auto|streaming|persistent: the tile-row layout and kernel of plans whose offsets are not mu(M)'s
// (DeviceTileMetadata::row_builder; auto, the default, is what the Runtime uses: row-aligned where
// prep::prefer_row_aligned allows it; streaming / persistent: the compact layout from those look-back kernels).
// Usage: bench_launch_prep [--runs N] [--heads H] [--density D] [--plan SUBSTR] [--explicit-items]
//                          [--row-builder auto|streaming|persistent] [--out DIR]
//   (writes DIR/launch_prep.json). --runs below 50 is for profilers (ncu); --plan keeps the plans whose id
//   contains SUBSTR.
#include <cuda_runtime.h>
#include <cstdio>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/launch_prep.hpp"
#include "cuda/check.cuh"
#include "cuda/launch_prep_gpu.hpp"
#include "gpu_busy.cuh"
#include "tessera/geometry.hpp"

using namespace tessera;

namespace {

// Random mask in block-CSR, each block active with probability `density` (xorshift, fixed seed).
HostMaskState wan_mask(std::int64_t heads, std::int64_t nb, double density, std::uint64_t seed) {
  HostMaskState m;
  m.shape = MaskShape{1, heads, nb, nb};
  m.row_offsets.reserve(heads * nb + 1);
  m.row_offsets.push_back(0);
  const auto threshold = static_cast<std::uint64_t>(density * 18446744073709551615.0);
  std::uint64_t x = seed | 1;
  for (std::int64_t r = 0; r < heads * nb; ++r) {
    for (std::int64_t c = 0; c < nb; ++c) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      if (x < threshold) m.col_indices.push_back(static_cast<std::int32_t>(c));
    }
    m.row_offsets.push_back(static_cast<std::int32_t>(m.col_indices.size()));
  }
  m.stats.shape = m.shape;
  m.stats.counters.active_blocks = static_cast<std::int64_t>(m.col_indices.size());
  return m;
}

// All of `text` as a number in [lo, hi] (`range` spells it for the message); otherwise a message naming `option`
// and exit code 2, before any GPU work (std::stoi aborted on "abc", took "5x" as 5 and clamped 0 to 1).
template <class T>
T number_arg(const std::string& option, const std::string& text, T lo, T hi, const char* range) {
  T v{};
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end || !(v >= lo && v <= hi)) {
    std::fprintf(stderr, "%s: expected a number in %s, got '%s'\n", option.c_str(), range, text.c_str());
    std::exit(2);
  }
  return v;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 50;
  std::int64_t heads = 40;
  double density = 0.10;
  std::string out_dir, plan_filter;
  bool implicit_items = true;
  prep::RowBuilder row_builder = prep::RowBuilder::kAuto;
  const char* row_builder_name = "auto";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value for %s\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--runs") runs = number_arg(a, next(), 1, 1000000, "[1, 1000000]");
    else if (a == "--heads") heads = number_arg<std::int64_t>(a, next(), 1, 1024, "[1, 1024]");
    else if (a == "--density") density = number_arg(a, next(), 0.0, 1.0, "[0, 1]");
    else if (a == "--out") out_dir = next();
    else if (a == "--plan") plan_filter = next();
    else if (a == "--explicit-items") implicit_items = false;
    else if (a == "--row-builder") {
      const std::string v = next();
      if (v == "auto") row_builder = prep::RowBuilder::kAuto, row_builder_name = "auto";
      else if (v == "streaming") row_builder = prep::RowBuilder::kStreaming, row_builder_name = "streaming";
      else if (v == "persistent") row_builder = prep::RowBuilder::kPersistent, row_builder_name = "persistent";
      else {
        std::fprintf(stderr, "--row-builder: expected auto, streaming or persistent, got '%s'\n", v.c_str());
        return 2;
      }
    } else {
      std::fprintf(stderr, "usage: bench_launch_prep [--runs N] [--heads H] [--density D] [--plan SUBSTR] "
                           "[--explicit-items] [--row-builder auto|streaming|persistent] [--out DIR]\n");
      return 2;
    }
  }
  const char* const mappings[] = {
      "q64d.kv64d",  "q64c2.kv64d", "q64c4.kv64d", "q64c8.kv64d", "q64r2.kv64d", "q64r4.kv64d",
      "q64d.kv64c2", "q64d.kv64c4", "q64d.kv64c8", "q64d.kv64p2", "q64d.kv64p4", "q64d.kv64p8",
      "q64d.kv64r2", "q64d.kv64r4", "q64c2.kv64c2", "q64c2.kv64p2", "q64r2.kv64r2"};
  const char* const orgs[] = {"g1.tasc.split1", "g1.tasc.split4", "g1p.tasc.split1", "g1.trun.split1", "g1.tdesc.split1"};
  std::vector<std::string> ids;
  const std::string pre = "sm90a.mma.bf16.d128.";
  for (const char* m : mappings) ids.push_back(pre + m + "." + orgs[0] + ".s2.w4");
  for (int o = 1; o < 5; ++o) ids.push_back(pre + "q64d.kv64d." + orgs[o] + ".s2.w4");
  for (int o = 1; o < 3; ++o) ids.push_back(pre + "q64c2.kv64p2." + orgs[o] + ".s2.w4");
  std::erase_if(ids, [&](const std::string& id) { return id.find(plan_filter) == std::string::npos; });
  if (ids.empty()) {
    std::fprintf(stderr, "--plan: no benchmarked plan id contains '%s'\n", plan_filter.c_str());
    return 2;
  }
  if (!out_dir.empty()) {  // created before any GPU work, so a bad --out fails at once instead of after the runs
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    if (ec || !std::filesystem::is_directory(out_dir)) {
      std::fprintf(stderr, "--out: cannot create directory '%s': %s\n", out_dir.c_str(),
                   ec ? ec.message().c_str() : "it exists and is not a directory");
      return 2;
    }
  }
  if (cuda_device_count() == 0) {
    std::fprintf(stderr, "bench_launch_prep: no CUDA device\n");
    return 1;
  }
  const std::int64_t n = 75600, nb = num_blocks(n, 64);
  const HostMaskState hm = wan_mask(heads, nb, density, 0x5eed);
  cudaStream_t stream;
  TESSERA_CUDA_CHECK(cudaStreamCreate(&stream));
  const Stream s = reinterpret_cast<Stream>(stream);
  const DeviceMaskState dm = upload_mask_state(hm, s);
  const PrepProblem pr{1, heads, heads, n, n, 128};
  std::printf("Wan2.1 720p Q64K64: N = %lld, %lld heads, %lld x %lld blocks, density %.4f (%lld active blocks), "
              "%d runs, tile-row builder for c_q = 1: %s\n",
              (long long)n, (long long)heads, (long long)nb, (long long)nb,
              static_cast<double>(dm.nnz) / (heads * nb * nb), (long long)dm.nnz, runs,
              row_builder_name);

  cudaEvent_t e0, e1, em;
  TESSERA_CUDA_CHECK(cudaEventCreate(&e0));
  TESSERA_CUDA_CHECK(cudaEventCreate(&e1));
  TESSERA_CUDA_CHECK(cudaEventCreate(&em));
  nlohmann::json results = nlohmann::json::array();
  std::printf("%-58s %10s %8s %8s %10s %10s %10s %9s %8s %7s %s\n", "plan", "gpu_us", "rows_us", "items_us", "idle_us",
              "wall_us", "entries", "items", "partials", "<50us", "layout");
  for (const std::string& id : ids) {
    const Plan plan = parse_plan_id(id);
    DeviceTileMetadata md;
    md.row_builder = row_builder;
    for (int w = 0; w < 3; ++w) {  // allocations happen here
      enqueue_prepare_plan_gpu(plan, dm, pr, s, md, implicit_items);
      finish_prepare_plan_gpu(md, s);
    }
    // busy = true: a 300 us busy kernel precedes every sample (the GPU is warm, as after a GEMM); false: the
    // preparation runs alone after a host synchronisation (the GPU may sit at its idle clock).
    // Busy samples also record an event between the tile-row and the work-item builders (rows_us, items_us).
    std::vector<double> rows_us, items_us;
    auto sample = [&](bool busy, std::vector<double>& gpu_us, std::vector<double>& wall_us) {
      if (busy) bench::keep_gpu_busy(stream, 300.0);
      md.rows_done_event = busy ? em : nullptr;
      const auto t0 = std::chrono::steady_clock::now();
      TESSERA_CUDA_CHECK(cudaEventRecord(e0, stream));
      enqueue_prepare_plan_gpu(plan, dm, pr, s, md, implicit_items);
      TESSERA_CUDA_CHECK(cudaEventRecord(e1, stream));
      finish_prepare_plan_gpu(md, s);  // no synchronization for a zero-copy plan with implicit items
      TESSERA_CUDA_CHECK(cudaEventSynchronize(e1));
      const auto t1 = std::chrono::steady_clock::now();
      float ms = 0;
      TESSERA_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      gpu_us.push_back(ms * 1e3);
      wall_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      if (busy) {
        TESSERA_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, em));
        rows_us.push_back(ms * 1e3);
        TESSERA_CUDA_CHECK(cudaEventElapsedTime(&ms, em, e1));
        items_us.push_back(ms * 1e3);
      }
    };
    std::vector<double> gpu_us, wall_us, idle_gpu_us, idle_wall_us;
    bench::keep_gpu_busy(stream, 20000.0);  // 20 ms to ramp the clock
    for (int r = 0; r < runs; ++r) sample(true, gpu_us, wall_us);
    for (int r = 0; r < runs; ++r) sample(false, idle_gpu_us, idle_wall_us);
    md.rows_done_event = nullptr;
    const double g = median(gpu_us), w = median(wall_us), gi = median(idle_gpu_us);
    const double gr = median(rows_us), gt = median(items_us);
    // Live entries (a row-aligned layout's n_entries is its arrays' extent): from the compacted download, which also
    // checks the layout (outside the timed runs).
    const std::int64_t entries = md.row_aligned ? download_tile_metadata(md, s).n_entries() : md.n_entries;
    std::printf("%-58s %10.1f %8.1f %8.1f %10.1f %10.1f %10lld %9d %8d %7s %s\n", id.c_str(), g, gr, gt, gi, w,
                (long long)entries, md.n_items, md.n_partials, g < 50 ? "yes" : "NO",
                md.row_aligned ? "aligned" : "compact");
    results.push_back({{"plan", id}, {"gpu_us_median", g}, {"rows_us_median", gr}, {"items_us_median", gt},
                       {"gpu_us_median_after_idle", gi},
                       {"wall_us_median", w}, {"entries", entries}, {"row_aligned", md.row_aligned},
                       {"items", md.n_items}, {"implicit_items", md.implicit_items}, {"partials", md.n_partials},
                       {"row_builder", row_builder_name},
                       {"runs", runs},
                       {"metadata_bytes_bound", md.bounds.metadata_bytes}});
  }
  if (!out_dir.empty()) {
    nlohmann::json doc{{"benchmark", "launch_prep"},
                       {"mask", {{"n", n}, {"block", 64}, {"heads", heads}, {"density_target", density},
                                 {"active_blocks", dm.nnz}}},
                       {"results", results}};
    const std::string path = (std::filesystem::path(out_dir) / "launch_prep.json").string();
    std::ofstream out(path);
    out << doc.dump(2) << "\n";
    out.close();
    if (!out) {
      std::fprintf(stderr, "--out: cannot write '%s'\n", path.c_str());
      return 1;
    }
    std::printf("wrote %s\n", path.c_str());
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaEventDestroy(em);
  cudaStreamDestroy(stream);
  return 0;
}
