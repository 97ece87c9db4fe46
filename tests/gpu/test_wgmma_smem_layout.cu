// GPU test of the wgmma kernels' shared-memory layout (src/kernels/wgmma/pipeline.cuh, SmemLayout; config.cuh): for
// dynamic windows that start on and off a 1024-byte boundary (a static pad of 16 to 1008 bytes before them), the
// operands start on a 1024-byte boundary, the small region (barriers, item ring) is 8-byte aligned and apart from the
// operands, and both end inside the Config::kSmemBytes the launcher asks for. A Config::kSmallInGap tile (the s1 tile,
// whose two CTAs per SM leave no room for the small region above the slack) takes the in-gap branch only with a
// misaligned window, which a real launch probably never has: this test is where that branch runs.
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

// out[0..2]: shared-window addresses of the dynamic window, the operands and the small region.
template <class Cfg, int kPad>
__global__ void smem_layout_kernel(long long* out) {
  __shared__ alignas(16) unsigned char pad[kPad > 0 ? kPad : 16];
  extern __shared__ __align__(16) unsigned char smem_raw[];
  if (threadIdx.x == 0) {
    if constexpr (kPad > 0) pad[kPad - 1] = 1;  // keeps the pad (and so the window's offset)
    const wg::SmemLayout<Cfg> layout(smem_raw);
    out[0] = static_cast<long long>(__cvta_generic_to_shared(smem_raw));
    out[1] = static_cast<long long>(__cvta_generic_to_shared(layout.operands));
    out[2] = static_cast<long long>(__cvta_generic_to_shared(layout.small_region));
    if constexpr (kPad > 0) out[3] = pad[kPad - 1];
  }
}

struct Placement {
  long long raw, operands, small_region;
};

template <class Cfg, int kPad>
Placement place() {
  auto* fn = &smem_layout_kernel<Cfg, kPad>;
  TESSERA_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn),
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, int(Cfg::kSmemBytes)));
  long long* d = nullptr;
  TESSERA_CUDA_CHECK(cudaMalloc(&d, 4 * sizeof(long long)));
  TESSERA_CUDA_CHECK(cudaMemset(d, 0xff, 4 * sizeof(long long)));
  fn<<<1, 32, Cfg::kSmemBytes>>>(d);
  TESSERA_CUDA_CHECK(cudaGetLastError());
  long long h[4];
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
  misaligned += check<Cfg>(place<Cfg, 0>(), std::string(name) + ", no pad") != 0;
  misaligned += check<Cfg>(place<Cfg, 16>(), std::string(name) + ", pad 16") != 0;
  misaligned += check<Cfg>(place<Cfg, 976>(), std::string(name) + ", pad 976") != 0;
  misaligned += check<Cfg>(place<Cfg, 1008>(), std::string(name) + ", pad 1008") != 0;
  EXPECT_GT(misaligned, 0) << name << ": no pad moved the window off a 1024-byte boundary, so neither the in-gap "
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
