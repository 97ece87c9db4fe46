#pragma once
// MaskStateWorkspace::Impl (src/cuda/mask_state.cu), visible to the benchmark for its per-stage timing hooks.
#include <cuda_runtime.h>

#include "cuda/check.cuh"
#include "cuda/mask_state_counters.hpp"
#include "tessera/mask_state_gpu.hpp"

namespace tessera {

struct MaskStateWorkspace::Impl {
  /// Stage boundaries of one call, recorded on its stream when `stage_events` is set (benchmarks only).
  enum Stage { kStart = 0, kPass1, kScan, kCounters, kPass2, kStages };

  DeviceBuffer scratch;
  detail::DeviceCounters* host_counters = nullptr;  // pinned
  cudaEvent_t counters_ready = nullptr;             // recorded after the counters' device-to-host copy
  int device = -1;
  int sms = 0;
  int max_smem_optin = 0;
  /// Pass 2 is enqueued before the host waits for the counters, guarded on the device by the counters and by
  /// out.col_indices' capacity; the host relaunches it only when the capacity was short. False: pass 2 after the
  /// host has read the counters (the pre-speculation sequence; benchmarks compare the two).
  bool speculative_pass2 = true;
  /// The coarsened pair counts by the one-thread-per-group merge even where the shared-memory bitmap fits (tests
  /// of the path that very wide masks take; src/cuda/mask_state_coarsen.cu).
  bool coarsen_by_merge = false;
  /// Count MaskCounters::coarsened_pairs (selection features coarsen_cost2/4/8). Runtime::run turns it off for a
  /// request whose plan-table tree never splits on them (or a forced plan): then coarsened_pairs = -1, the stats'
  /// coarsen_cost are NaN, and the host reads the counters before pass 2 instead of after it and the count.
  bool count_coarsened = true;
  /// Host time (microseconds) the last build_mask_state_gpu() call spent waiting for the counters (Runtime: the part
  /// of mu(M)'s host time that is a wait for the GPU, not dispatch work).
  double last_wait_us = 0;
  /// Benchmarks: kStages events recorded at the stage boundaries (null: none recorded).
  cudaEvent_t* stage_events = nullptr;

  ~Impl() {
    if (host_counters) cudaFreeHost(host_counters);
    if (counters_ready) cudaEventDestroy(counters_ready);
  }
  void ensure_device() {
    int d = 0;
    TESSERA_CUDA_CHECK(cudaGetDevice(&d));
    if (d == device) return;
    TESSERA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d));
    TESSERA_CUDA_CHECK(cudaDeviceGetAttribute(&max_smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, d));
    if (!host_counters) {
      void* p = nullptr;
      TESSERA_CUDA_CHECK(cudaHostAlloc(&p, sizeof(detail::DeviceCounters), cudaHostAllocDefault));
      host_counters = static_cast<detail::DeviceCounters*>(p);
    }
    if (counters_ready) TESSERA_CUDA_CHECK(cudaEventDestroy(counters_ready));
    counters_ready = nullptr;
    TESSERA_CUDA_CHECK(cudaEventCreateWithFlags(&counters_ready, cudaEventDisableTiming));
    device = d;
  }
  void mark(Stage s, cudaStream_t stream) const {
    if (stage_events) TESSERA_CUDA_CHECK(cudaEventRecord(stage_events[s], stream));
  }
};

}  // namespace tessera
