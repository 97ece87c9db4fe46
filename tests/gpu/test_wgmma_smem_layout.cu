// GPU test of the wgmma kernels' shared-memory layout (src/kernels/wgmma/pipeline.cuh, SmemLayout; config.cuh): for
// windows that start on and off a 1024-byte boundary, the operands start on a 1024-byte boundary, the small region
// (barriers, item ring) is 8-byte aligned and apart from the operands, and both end inside the Config::kSmemBytes the
// launcher asks for. A Config::kSmallInGap tile (the s1 tile, whose two CTAs per SM leave no room for the small region
// above the slack) takes the in-gap branch only with a misaligned window, which a real launch does not have: on the
// H200 (CUDA 13.0) the dynamic window starts on a 1024-byte boundary even after a static array of 16-1008 bytes
// (measured in session 21, when this test's first form shifted the window with such a pad and saw no gap). So the test
// hands SmemLayout a window that starts `offset` bytes into a dynamic allocation of kSmemBytes + offset bytes.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "cuda/check.cuh"
#include "gpu_test_util.hpp"
#include "kernels/wgmma/config.cuh"
#include "kernels/wgmma/pipeline.cuh"
#include "tessera/cuda_types.hpp"

namespace {
using namespace tessera;
namespace wg = tessera::kernels::wgmma;

// out[0..2]: shared-window addresses of the window (`offset` bytes into the dynamic allocation), the operands and the
// small region.
template <class Cfg>
__global__ void smem_layout_kernel(int offset, long long* out) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  if (threadIdx.x == 0) {
    unsigned char* window = smem_raw + offset;
    const wg::SmemLayout<Cfg> layout(window);
    out[0] = static_cast<long long>(__cvta_generic_to_shared(window));
    out[1] = static_cast<long long>(__cvta_generic_to_shared(layout.operands));
    out[2] = static_cast<long long>(__cvta_generic_to_shared(layout.small_region));
  }
}

struct Placement {
  long long raw, operands, small_region;
};

template <class Cfg>
Placement place(int offset) {
  auto* fn = &smem_layout_kernel<Cfg>;
  const int bytes = int(Cfg::kSmemBytes) + offset;
  TESSERA_CUDA_CHECK(
      cudaFuncSetAttribute(reinterpret_cast<const void*>(fn), cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  long long* d = nullptr;
  TESSERA_CUDA_CHECK(cudaMalloc(&d, 3 * sizeof(long long)));
  TESSERA_CUDA_CHECK(cudaMemset(d, 0xff, 3 * sizeof(long long)));
  fn<<<1, 32, bytes>>>(offset, d);
  TESSERA_CUDA_CHECK(cudaGetLastError());
  long long h[3];
  TESSERA_CUDA_CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  TESSERA_CUDA_CHECK(cudaFree(d));
  return {h[0], h[1], h[2]};
}

// Checks one placement; returns the alignment gap.
template <class Cfg>
long long check(const Placement& p, const std::string& what) {
  SCOPED_TRACE(what);
  const long long end = p.raw + static_cast<long long>(Cfg::kSmemBytes);
  const long long op_end = p.operands + static_cast<long long>(Cfg::kOperandBytes);
  const long long small_end = p.small_region + static_cast<long long>(Cfg::kSmallBytes);
  EXPECT_EQ(p.raw % 16, 0);
  EXPECT_EQ(p.operands % 1024, 0) << "operands not on a 1024-byte boundary (128-byte swizzle atoms)";
  EXPECT_GE(p.operands, p.raw);
  EXPECT_LE(op_end, end) << "operands past kSmemBytes";
  EXPECT_EQ(p.small_region % 8, 0) << "mbarriers need 8-byte alignment";
  EXPECT_GE(p.small_region, p.raw);
  EXPECT_LE(small_end, end) << "small region past kSmemBytes";
  EXPECT_TRUE(small_end <= p.operands || p.small_region >= op_end) << "small region overlaps the operands";
  const long long gap = p.operands - p.raw;
  if (Cfg::kSmallInGap && gap >= static_cast<long long>(Cfg::kSmallBytes))
    EXPECT_EQ(p.small_region, p.raw) << "a kSmallInGap tile puts the small region in a gap that holds it";
  return gap;
}

template <class Cfg>
void check_all(const char* name) {
  long long misaligned = 0;
  for (const int offset : {0, 16, 976, 1008})
    misaligned += check<Cfg>(place<Cfg>(offset), std::string(name) + ", window offset " + std::to_string(offset)) != 0;
  EXPECT_GT(misaligned, 0) << name << ": no offset moved the window off a 1024-byte boundary, so neither the in-gap "
                           << "branch nor the rounding was exercised";
}

TEST(WgmmaSmemLayout, OperandsAlignedAndSmallRegionInsideForAnyWindowOffset) {
  TESSERA_REQUIRE_GPU();
  // The s1 tile (kSmallInGap), a persistent two-consumer tile (item ring), a swapped tile (P^T and maxima buffers).
  using S1 = wg::Config<__nv_bfloat16, 128, 64, 128, 8, 1>;
  using Persistent = wg::Config<__nv_bfloat16, 128, 128, 128, 12, 2>;
  using Swapped = wg::Config<__nv_bfloat16, 128, 32, 64, 8, 2>;
  static_assert(S1::kSmallInGap && !Persistent::kSmallInGap && Persistent::kPersistent && Swapped::kSwapAB);
  check_all<S1>("t64x128.w8.s1");
  check_all<Persistent>("t128x128.w12.s2");
  check_all<Swapped>("t32x64.w8.s2");
}

}  // namespace
