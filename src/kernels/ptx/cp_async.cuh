#pragma once
// cp.async (sm_80+): asynchronous 16-byte global -> shared copies, bypassing L1 (.cg), with zero-fill.
#include <cstdint>

namespace tessera::ptx {

/// Copies 16 bytes from global `src` to shared address `dst` when `valid`; otherwise writes 16 zero bytes
/// to `dst` and reads nothing (src-size 0; `src` must still be a valid-looking address, it is not dereferenced).
__device__ __forceinline__ void cp_async_16_zfill(std::uint32_t dst, const void* src, bool valid) {
  const int src_size = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_size) : "memory");
}

/// Copies 16 bytes from global `src` to shared address `dst` (both 16-byte aligned).
__device__ __forceinline__ void cp_async_16(std::uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

/// Closes the current group of cp.async operations issued by this thread.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

/// Waits until at most N of this thread's committed groups are still pending.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace tessera::ptx
