#pragma once
// mbarrier wrappers (sm_90): shared-memory barriers with an arrival count and a transaction-byte count, the
// completion mechanism of TMA loads. A barrier cycles through phases; a phase completes when its arrival count is
// reached and its expected transaction bytes have landed. try_wait.parity(P) succeeds once the phase of parity P
// has completed; on a fresh barrier (phase 0 in progress) waiting on parity 1 succeeds at once, which is why
// producers start waiting on "empty" barriers with the flipped parity (wgmma/pipeline.cuh). CCCL's cuda::ptx
// provides every instruction used here.
#include <cuda/ptx>

#include <cstdint>

#include "kernels/ptx/arch.cuh"

namespace tessera::ptx {

/// Initializes barrier `bar` (shared memory, 8-byte aligned) for `count` arrivals per phase. One thread.
__device__ __forceinline__ void mbarrier_init(std::uint64_t* bar, std::uint32_t count) {
#if TESSERA_SM90
  cuda::ptx::mbarrier_init(bar, count);
#else
  __trap();
#endif
}

/// Makes barrier initializations visible to the async proxy (TMA) and the other threads; follow with a CTA barrier.
__device__ __forceinline__ void fence_barrier_init() {
#if TESSERA_SM90
  cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
#else
  __trap();
#endif
}

/// Arrives on `bar` (one of its `count` arrivals), release semantics at CTA scope.
__device__ __forceinline__ void mbarrier_arrive(std::uint64_t* bar) {
#if TESSERA_SM90
  (void)cuda::ptx::mbarrier_arrive(bar);
#else
  __trap();
#endif
}

/// Arrives on `bar` and adds `bytes` to the transaction bytes its current phase waits for (the TMA loads that
/// complete on it). One thread, before or after issuing the loads.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(std::uint64_t* bar, std::uint32_t bytes) {
#if TESSERA_SM90
  (void)cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                             bar, bytes);
#else
  __trap();
#endif
}

/// Whether the phase of parity `parity` of `bar` has completed (one bounded hardware wait).
__device__ __forceinline__ bool mbarrier_try_wait(std::uint64_t* bar, std::uint32_t parity) {
#if TESSERA_SM90
  return cuda::ptx::mbarrier_try_wait_parity(bar, parity);
#else
  __trap();
  return true;
#endif
}

/// Spins until the phase of parity `parity` of `bar` has completed. The loop lives inside one asm statement (as in
/// CUTLASS), so the compiler sees no data-dependent branch: a branch it cannot prove warp-uniform would make it
/// serialize in-flight wgmma (ptxas C7518). A broken pipeline fails fast instead of hanging: after 2^26
/// unsuccessful hardware waits (each bounded by the hardware's time limit, so many seconds in all) the thread traps,
/// which the host sees as cudaErrorLaunchFailure.
__device__ __forceinline__ void mbarrier_wait(std::uint64_t* bar, std::uint32_t parity) {
#if TESSERA_SM90
  const std::uint32_t addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(bar));
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      ".reg .u32 polls;\n"
      "mov.u32 polls, 0;\n"
      "TESSERA_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@done bra TESSERA_DONE;\n"
      "add.u32 polls, polls, 1;\n"
      "setp.eq.u32 done, polls, 67108864;\n"
      "@done trap;\n"
      "bra TESSERA_WAIT;\n"
      "TESSERA_DONE:\n"
      "}\n" ::"r"(addr),
      "r"(parity)
      : "memory");
#else
  __trap();
#endif
}

/// Arrives on `bar` when `pred` holds; every thread of the warp executes it (a predicated instruction, no branch,
/// for the same reason as mbarrier_wait).
__device__ __forceinline__ void mbarrier_arrive_if(std::uint64_t* bar, bool pred) {
#if TESSERA_SM90
  const std::uint32_t addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(bar));
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %1, 0;\n@p mbarrier.arrive.shared::cta.b64 _, [%0];\n}\n" ::"r"(addr),
      "r"(int(pred))
      : "memory");
#else
  __trap();
#endif
}

}  // namespace tessera::ptx
