#pragma once
// fence.proxy.async.shared::cta (sm_90, CCCL cuda::ptx): orders this thread's earlier generic-proxy accesses of
// shared memory (ordinary stores, stmatrix) before later async-proxy accesses of it (wgmma operand reads through
// descriptors, TMA). The swapped wgmma consumer stages P^T with stmatrix and then reads it as a wgmma B operand:
// every writing thread fences, then the warpgroup synchronizes (a named barrier), then one wgmma batch reads it.
#include <cuda/ptx>

#include "kernels/ptx/arch.cuh"

namespace tessera::ptx {

/// fence.proxy.async.shared::cta.
__device__ __forceinline__ void fence_proxy_async_shared() {
#if TESSERA_SM90
  cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
#else
  __trap();
#endif
}

}  // namespace tessera::ptx
