// Host-side dispatch of Runtime::run on the GPU machine (issue #6 target: P95 <= 10 us), with Google Benchmark:
//  - BM_EmptyKernelLaunch: host time to enqueue an empty kernel (the floor of any launch on this machine).
//  - BM_RuntimeHostDispatch/<plan>: Runtime::run on a new mask every iteration (mask_version 0: mu(M), selection,
//    preparation, kernel), timed by DispatchInfo::host_dispatch_us (host time excluding the waits for the GPU), and
//    its parts: select (lookup + eligibility), prepare enqueue, kernel enqueue. Counters p50_us / p95_us over the
//    iterations, and select_prepare_p50_us / select_prepare_p95_us: lookup + eligibility + preparation launch, the
//    part issue #6 defines as host-side dispatch (the attention and merge launches are counted in p50_us / p95_us). Request: 1 x 16,384 tokens x 8 heads x d128 bf16, 64 x 64 blocks, ~10 % random block-CSR mask.
//  - BM_RuntimeHostDispatchInSitu/large/busy_us/sched: the same counters for the selected plan in the main job's
//    setting: every request follows `busy_us` microseconds of GPU work the host waited for (a long attention kernel,
//    as in `tessera run`), on the small request (large 0) or STA-real's size (large 1: 115,200 tokens x 24 heads,
//    128 x 128 blocks), with the context's host-synchronization mode `sched` (0: the driver's default, 1: spin,
//    2: yield, 3: blocking sync) and speculative preparation on or off (`spec`, RuntimeOptions::speculative_prepare).
// Needs a GPU (skips each benchmark with a message otherwise).
//   build/gpu/bin/bench_runtime_dispatch [--benchmark_out=FILE --benchmark_out_format=json]
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cuda/check.cuh"
#include "gpu_busy.cuh"
#include "tessera/cuda_types.hpp"
#include "tessera/runtime.hpp"

namespace {

using namespace tessera;

__global__ void empty_kernel() {}

bool have_gpu() { return cuda_device_count() > 0; }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

void BM_EmptyKernelLaunch(benchmark::State& state) {
  if (!have_gpu()) return state.SkipWithError("no CUDA device");
  cudaStream_t s;
  TESSERA_CUDA_CHECK(cudaStreamCreate(&s));
  int i = 0;
  for (auto _ : state) {
    empty_kernel<<<1, 32, 0, s>>>();
    if (++i % 256 == 0) {  // keep the queue short (not timed)
      state.PauseTiming();
      TESSERA_CUDA_CHECK(cudaStreamSynchronize(s));
      state.ResumeTiming();
    }
  }
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(s));
  TESSERA_CUDA_CHECK(cudaStreamDestroy(s));
}
BENCHMARK(BM_EmptyKernelLaunch);

/// One device request (tensors zeroed; the values do not matter for host time).
struct DeviceRequest {
  static constexpr std::int64_t kD = 128;
  std::int64_t tokens = 16384, heads = 8, block = 64;
  void* q = nullptr;
  void* k = nullptr;
  void* v = nullptr;
  void* o = nullptr;
  std::int32_t* rows = nullptr;
  std::int32_t* cols = nullptr;
  AttentionRequest req;

  DeviceRequest(std::int64_t n = 16384, std::int64_t h = 8, std::int64_t b = 64) : tokens(n), heads(h), block(b) {
    const std::size_t bytes = static_cast<std::size_t>(tokens * heads * kD) * 2;
    for (void** p : {&q, &k, &v, &o}) {
      TESSERA_CUDA_CHECK(cudaMalloc(p, bytes));
      TESSERA_CUDA_CHECK(cudaMemset(*p, 0, bytes));
    }
    const std::int64_t nb = (tokens + block - 1) / block;
    std::vector<std::int32_t> ro{0}, ci;
    std::mt19937_64 g(7);
    for (std::int64_t r = 0; r < heads * nb; ++r) {
      for (std::int64_t c = 0; c < nb; ++c)
        if (g() % 10 == 0) ci.push_back(static_cast<std::int32_t>(c));
      ro.push_back(static_cast<std::int32_t>(ci.size()));
    }
    TESSERA_CUDA_CHECK(cudaMalloc(&rows, ro.size() * 4));
    TESSERA_CUDA_CHECK(cudaMalloc(&cols, ci.size() * 4));
    TESSERA_CUDA_CHECK(cudaMemcpy(rows, ro.data(), ro.size() * 4, cudaMemcpyHostToDevice));
    TESSERA_CUDA_CHECK(cudaMemcpy(cols, ci.data(), ci.size() * 4, cudaMemcpyHostToDevice));
    req.q = make_tensor(q, DType::kBFloat16, Device::kCuda, {1, tokens, heads, kD});
    req.k = make_tensor(k, DType::kBFloat16, Device::kCuda, {1, tokens, heads, kD});
    req.v = make_tensor(v, DType::kBFloat16, Device::kCuda, {1, tokens, heads, kD});
    req.o = make_tensor(o, DType::kBFloat16, Device::kCuda, {1, tokens, heads, kD});
    req.geometry = {static_cast<int>(block), static_cast<int>(block)};
    req.mask = BlockMask::from_block_csr(
        make_tensor(rows, DType::kInt32, Device::kCuda, {static_cast<std::int64_t>(ro.size())}),
        make_tensor(cols, DType::kInt32, Device::kCuda, {static_cast<std::int64_t>(ci.size())}), 1, heads, nb, nb);
  }
  ~DeviceRequest() {
    for (void* p : {q, k, v, o, static_cast<void*>(rows), static_cast<void*>(cols)}) cudaFree(p);
  }
};

/// The timed loop of both dispatch benchmarks: one Runtime::run of `req` per iteration (iteration time: its
/// host_dispatch_us), then `busy_us` of GPU work (0: none) and a synchronization, untimed, so each request starts on
/// an idle stream. Sets the counters: P50 / P95 of the whole dispatch, select, prepare, select_prepare; kernel-enqueue
/// P50; speculation_hits (iterations whose preparation was enqueued before mu(M) and kept).
void time_dispatch(benchmark::State& state, Runtime& rt, const AttentionRequest& req, const RunOptions& o,
                   cudaStream_t cs, double busy_us) {
  const Stream s = reinterpret_cast<Stream>(cs);
  std::vector<double> all, sel, prep, sel_prep, launch;
  int hits = 0;
  for (auto _ : state) {
    rt.run(req, s, o);
    const DispatchInfo& d = rt.last_dispatch();
    hits += d.prepare_speculation_hit;
    state.SetIterationTime(d.host_dispatch_us * 1e-6);
    all.push_back(d.host_dispatch_us);
    sel.push_back(d.host_select_us);
    prep.push_back(d.host_prepare_us);
    sel_prep.push_back(d.host_select_us + d.host_prepare_us);
    launch.push_back(d.host_launch_us);
    if (busy_us > 0) bench::keep_gpu_busy(cs, busy_us);  // the next request waits for this GPU work
    TESSERA_CUDA_CHECK(cudaStreamSynchronize(cs));
  }
  state.counters["p50_us"] = percentile(all, 0.5);
  state.counters["p95_us"] = percentile(all, 0.95);
  state.counters["select_p50_us"] = percentile(sel, 0.5);
  state.counters["select_p95_us"] = percentile(sel, 0.95);
  state.counters["prepare_p50_us"] = percentile(prep, 0.5);
  state.counters["prepare_p95_us"] = percentile(prep, 0.95);
  state.counters["select_prepare_p50_us"] = percentile(sel_prep, 0.5);
  state.counters["select_prepare_p95_us"] = percentile(sel_prep, 0.95);
  state.counters["kernel_enqueue_p50_us"] = percentile(launch, 0.5);
  state.counters["speculation_hits"] = hits;
}

// range(0): 0 = the selected plan, 1 = forced Direct split 1, 2 = forced Direct split 4 (work items + merge),
// 3 = forced Coarsened KV c2 (T_KV = 128: a tile-row builder, row-aligned, so one preparation launch and nothing
// copied back).
void BM_RuntimeHostDispatch(benchmark::State& state) {
  if (!have_gpu()) return state.SkipWithError("no CUDA device");
  DeviceRequest dr;
  Runtime rt;
  cudaStream_t cs;
  TESSERA_CUDA_CHECK(cudaStreamCreate(&cs));
  const Stream s = reinterpret_cast<Stream>(cs);
  RunOptions o;
  if (state.range(0) > 0) {
    o.plan_id = rt.direct_plan(dr.req);
    if (state.range(0) == 2) o.plan_id.replace(o.plan_id.find(".split1."), 8, ".split4.");
    if (state.range(0) == 3) o.plan_id = rt.arch() + ".mma.bf16.d128.q64d.kv64c2.g1.tasc.split1.s1.w4";
  }
  for (int w = 0; w < 3; ++w) rt.run(dr.req, s, o);  // buffers grow, kernels load
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(cs));
  time_dispatch(state, rt, dr.req, o, cs, 0);
  state.SetLabel(rt.last_dispatch().plan_id);
  TESSERA_CUDA_CHECK(cudaStreamDestroy(cs));
}
BENCHMARK(BM_RuntimeHostDispatch)->ArgName("plan")->Arg(0)->Arg(1)->Arg(2)->Arg(3)->UseManualTime()->Iterations(400);

void BM_RuntimeHostDispatchInSitu(benchmark::State& state) {
  if (!have_gpu()) return state.SkipWithError("no CUDA device");
  const unsigned sched[] = {cudaDeviceScheduleAuto, cudaDeviceScheduleSpin, cudaDeviceScheduleYield,
                            cudaDeviceScheduleBlockingSync};
  if (cudaSetDeviceFlags(sched[state.range(2)]) != cudaSuccess) {
    (void)cudaGetLastError();
    return state.SkipWithError("cudaSetDeviceFlags refused this scheduling mode on the active context");
  }
  DeviceRequest dr = state.range(0) ? DeviceRequest(115200, 24, 128) : DeviceRequest();
  RuntimeOptions ro;
  ro.speculative_prepare = state.range(3) != 0;
  Runtime rt(ro);
  cudaStream_t cs;
  TESSERA_CUDA_CHECK(cudaStreamCreate(&cs));
  const Stream s = reinterpret_cast<Stream>(cs);
  const double busy_us = static_cast<double>(state.range(1));
  for (int w = 0; w < 3; ++w) rt.run(dr.req, s, {});
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(cs));
  time_dispatch(state, rt, dr.req, {}, cs, busy_us);
  state.SetLabel(rt.last_dispatch().plan_id);
  TESSERA_CUDA_CHECK(cudaStreamDestroy(cs));
  TESSERA_CUDA_CHECK(cudaSetDeviceFlags(cudaDeviceScheduleAuto));
}
BENCHMARK(BM_RuntimeHostDispatchInSitu)
    ->ArgNames({"large", "busy_us", "sched", "spec"})
    ->Args({0, 0, 0, 0})->Args({0, 0, 0, 1})->Args({0, 20000, 0, 0})->Args({0, 20000, 0, 1})
    ->Args({1, 20000, 0, 0})->Args({1, 20000, 0, 1})->Args({1, 20000, 1, 1})
    ->UseManualTime()->Iterations(100);

}  // namespace

BENCHMARK_MAIN();
