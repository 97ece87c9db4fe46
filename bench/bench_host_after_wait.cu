// How fast the host runs right after it waited, on the GPU machine (issue #6: the main job's host-dispatch tail).
// Runtime::run's host work follows a wait for the GPU (the caller's previous work, then mu(M)'s counters); in
// BM_RuntimeHostDispatchInSitu the same dispatch took 10-20x longer after 20 ms of waiting than back to back, with
// every synchronization mode. This program separates the causes with three fixed host workloads, timed right after
// each way of waiting:
//   alu    a dependent chain of 4,096 integer multiply-adds (fixed cycles: reads the core's clock),
//   chase  4,096 dependent loads through a 1 MiB random cycle (warm, it sits in L2: reads the cache state),
//   launch one empty-kernel launch (the driver's host path).
// Ways of waiting: none (back to back), a GPU kernel of 2 / 20 ms waited for with cudaStreamSynchronize, a 20 ms host
// spin loop on the clock (no CUDA), a 20 ms sleep, and the 20 ms GPU wait followed by 200 us of host spinning before
// the workloads. Also counts the samples whose thread ran on another CPU after the wait (sched_getcpu).
// Prints one JSON object (medians and P95 in us per way of waiting). Needs a GPU.
//   build/gpu/bin/bench_host_after_wait [samples]
#include <cuda_runtime.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cuda/check.cuh"
#include "gpu_busy.cuh"

namespace {

using Clock = std::chrono::steady_clock;

__global__ void empty_kernel() {}

double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

volatile std::uint64_t g_sink = 0;

double time_alu() {
  const auto t = Clock::now();
  std::uint64_t x = g_sink | 1;
  for (int i = 0; i < 4096; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  g_sink = x;
  return us_since(t);
}

std::vector<std::uint32_t> make_cycle(std::size_t n) {
  std::vector<std::uint32_t> order(n), next(n);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin() + 1, order.end(), std::mt19937(3));
  for (std::size_t i = 0; i < n; ++i) next[order[i]] = order[(i + 1) % n];
  return next;
}

double time_chase(const std::vector<std::uint32_t>& next) {
  const auto t = Clock::now();
  std::uint32_t p = static_cast<std::uint32_t>(g_sink % next.size());
  for (int i = 0; i < 4096; ++i) p = next[p];
  g_sink = p;
  return us_since(t);
}

double time_launch(cudaStream_t s) {
  const auto t = Clock::now();
  empty_kernel<<<1, 32, 0, s>>>();
  return us_since(t);
}

void spin_host_us(double us) {
  const auto t = Clock::now();
  while (us_since(t) < us) {
  }
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  const int samples = argc > 1 ? std::atoi(argv[1]) : 40;
  cudaStream_t s;
  TESSERA_CUDA_CHECK(cudaStreamCreate(&s));
  const auto next = make_cycle((1u << 20) / 4);
  for (int i = 0; i < 20; ++i) time_alu(), time_chase(next), time_launch(s);  // warm everything once
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(s));
  struct Way {
    const char* name;
    double gpu_ms;      // GPU busy kernel waited for with cudaStreamSynchronize
    double spin_ms;     // host spin loop
    double sleep_ms;    // std::this_thread::sleep_for
    double after_us;    // host spin after the wait, before the workloads
  };
  const Way ways[] = {{"none", 0, 0, 0, 0},        {"gpu_2ms", 2, 0, 0, 0},   {"gpu_20ms", 20, 0, 0, 0},
                      {"host_spin_20ms", 0, 20, 0, 0}, {"sleep_20ms", 0, 0, 20, 0}, {"gpu_20ms_then_spin_200us", 20, 0, 0, 200}};
  std::printf("{\n  \"samples\": %d,\n  \"cpus\": %u,\n  \"ways\": {\n", samples, std::thread::hardware_concurrency());
  bool first = true;
  for (const Way& w : ways) {
    std::vector<double> alu, chase, launch, alu2;
    int migrated = 0;
    for (int i = 0; i < samples; ++i) {
      if (w.gpu_ms > 0) tessera::bench::keep_gpu_busy(s, w.gpu_ms * 1e3);
      const int cpu0 = sched_getcpu();
      if (w.gpu_ms > 0 || w.spin_ms == 0) TESSERA_CUDA_CHECK(cudaStreamSynchronize(s));
      if (w.spin_ms > 0) spin_host_us(w.spin_ms * 1e3);
      if (w.sleep_ms > 0) std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int>(w.sleep_ms * 1e3)));
      if (w.after_us > 0) spin_host_us(w.after_us);
      migrated += sched_getcpu() != cpu0;
      alu.push_back(time_alu());
      chase.push_back(time_chase(next));
      launch.push_back(time_launch(s));
      alu2.push_back(time_alu());
    }
    TESSERA_CUDA_CHECK(cudaStreamSynchronize(s));
    std::printf("%s    \"%s\": {\"alu_p50\": %.2f, \"alu_p95\": %.2f, \"chase_p50\": %.2f, \"chase_p95\": %.2f, "
                "\"launch_p50\": %.2f, \"launch_p95\": %.2f, \"alu_again_p50\": %.2f, \"migrated\": %d}",
                first ? "" : ",\n", w.name, percentile(alu, 0.5), percentile(alu, 0.95), percentile(chase, 0.5),
                percentile(chase, 0.95), percentile(launch, 0.5), percentile(launch, 0.95), percentile(alu2, 0.5),
                migrated);
    first = false;
  }
  std::printf("\n  }\n}\n");
  TESSERA_CUDA_CHECK(cudaStreamDestroy(s));
  return 0;
}
