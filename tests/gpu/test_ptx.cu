// GPU unit tests of the PTX layer (src/kernels/ptx): mma.sync m16n8k16 (bf16, fp16), ldmatrix (x4, x2, with and
// without .trans), cp.async with zero-fill, and the swizzled shared-memory layout (cp.async in, ldmatrix out).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cuda/check.cuh"
#include "gpu_test_util.hpp"
#include "kernels/ptx/cp_async.cuh"
#include "kernels/ptx/ldmatrix.cuh"
#include "kernels/ptx/mma.cuh"
#include "kernels/ptx/swizzle.cuh"

namespace {
using namespace tessera::ptx;

// A [16][16] row-major, B [16][8] (k, n) row-major in global memory; one warp builds fragments by the PTX layout
// formulas, runs one mma and writes C [16][8].
template <class T>
__global__ void mma_kernel(const T* a, const T* b, float* c) {
  const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  auto pk = [](T x, T y) {
    std::uint32_t r;
    std::uint16_t lo = *reinterpret_cast<const std::uint16_t*>(&x), hi = *reinterpret_cast<const std::uint16_t*>(&y);
    r = lo | (std::uint32_t(hi) << 16);
    return r;
  };
  std::uint32_t af[4] = {pk(a[g * 16 + 2 * t], a[g * 16 + 2 * t + 1]), pk(a[(g + 8) * 16 + 2 * t], a[(g + 8) * 16 + 2 * t + 1]),
                         pk(a[g * 16 + 2 * t + 8], a[g * 16 + 2 * t + 9]),
                         pk(a[(g + 8) * 16 + 2 * t + 8], a[(g + 8) * 16 + 2 * t + 9])};
  std::uint32_t bf[2] = {pk(b[(2 * t) * 8 + g], b[(2 * t + 1) * 8 + g]), pk(b[(2 * t + 8) * 8 + g], b[(2 * t + 9) * 8 + g])};
  float d[4] = {1.f, 1.f, 1.f, 1.f};  // C = 1 checks accumulation
  mma_m16n8k16(d, af, bf, T{});
  c[g * 8 + 2 * t] = d[0], c[g * 8 + 2 * t + 1] = d[1], c[(g + 8) * 8 + 2 * t] = d[2], c[(g + 8) * 8 + 2 * t + 1] = d[3];
}

template <class T>
void check_mma() {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> dist(-8, 8);  // small integers: exact in bf16/fp16 and fp32
  std::vector<T> a(256), b(128);
  std::vector<float> af(256), bf(128);
  for (int i = 0; i < 256; ++i) af[i] = float(dist(rng)) / 4, a[i] = T(af[i]);
  for (int i = 0; i < 128; ++i) bf[i] = float(dist(rng)) / 4, b[i] = T(bf[i]);
  T *da, *db;
  float* dc;
  TESSERA_CUDA_CHECK(cudaMalloc(&da, 512));
  TESSERA_CUDA_CHECK(cudaMalloc(&db, 256));
  TESSERA_CUDA_CHECK(cudaMalloc(&dc, 512));
  TESSERA_CUDA_CHECK(cudaMemset(dc, 0xff, 512));
  TESSERA_CUDA_CHECK(cudaMemcpy(da, a.data(), 512, cudaMemcpyHostToDevice));
  TESSERA_CUDA_CHECK(cudaMemcpy(db, b.data(), 256, cudaMemcpyHostToDevice));
  mma_kernel<T><<<1, 32>>>(da, db, dc);
  TESSERA_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> c(128);
  TESSERA_CUDA_CHECK(cudaMemcpy(c.data(), dc, 512, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      float r = 1.f;
      for (int k = 0; k < 16; ++k) r += af[i * 16 + k] * bf[k * 8 + j];
      ASSERT_EQ(c[i * 8 + j], r) << "C[" << i << "][" << j << "]";
    }
  cudaFree(da), cudaFree(db), cudaFree(dc);
}

TEST(Ptx, MmaM16N8K16Bf16) { TESSERA_REQUIRE_GPU(); check_mma<__nv_bfloat16>(); }
TEST(Ptx, MmaM16N8K16Fp16) { TESSERA_REQUIRE_GPU(); check_mma<__half>(); }

// 32 rows x 64 uint16 values in global memory (value = row * 64 + col). The kernel copies them into a swizzled
// smem tile by cp.async (rows >= valid_rows zero-filled), then reads 8x8 matrices with ldmatrix variants:
// out[mode][lane][reg] = the 2 packed values each lane holds.
__global__ void ldsm_kernel(const std::uint16_t* src, int valid_rows, std::uint32_t* out) {
  __shared__ __align__(128) std::uint16_t tile[32 * 64];
  const std::uint32_t base = smem_addr(tile);
  for (int i = threadIdx.x; i < 32 * 8; i += 32) {
    const int r = i / 8, c = i % 8;
    cp_async_16_zfill(base + swizzle_offset<8>(r, c), src + r * 64 + c * 8, r < valid_rows);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncwarp();
  const int lane = threadIdx.x;
  // matrix i = rows 8i..8i+7 (of the first 32 rows), chunk (lane / 8 + 1) % 8 -> exercises the swizzle.
  const int row = lane, chunk = (lane / 8 + 1) % 8;
  std::uint32_t r4[4], t4[4], r2[2], t2[2];
  ldmatrix_x4(r4, base + swizzle_offset<8>(row, chunk));
  ldmatrix_x4_trans(t4, base + swizzle_offset<8>(row, chunk));
  ldmatrix_x2(r2, base + swizzle_offset<8>(row & 15, chunk));
  ldmatrix_x2_trans(t2, base + swizzle_offset<8>(row & 15, chunk));
  for (int i = 0; i < 4; ++i) out[(0 * 32 + lane) * 4 + i] = r4[i], out[(1 * 32 + lane) * 4 + i] = t4[i];
  for (int i = 0; i < 2; ++i) out[(2 * 32 + lane) * 4 + i] = r2[i], out[(3 * 32 + lane) * 4 + i] = t2[i];
}

TEST(Ptx, CpAsyncZfillSwizzleLdmatrix) {
  TESSERA_REQUIRE_GPU();
  for (int valid_rows : {32, 13}) {
    std::vector<std::uint16_t> src(32 * 64);
    for (int i = 0; i < 32 * 64; ++i) src[i] = static_cast<std::uint16_t>(i + 1);
    std::uint16_t* ds;
    std::uint32_t* dout;
    TESSERA_CUDA_CHECK(cudaMalloc(&ds, src.size() * 2));
    TESSERA_CUDA_CHECK(cudaMalloc(&dout, 4 * 32 * 4 * 4));
    TESSERA_CUDA_CHECK(cudaMemset(dout, 0xff, 4 * 32 * 4 * 4));
    TESSERA_CUDA_CHECK(cudaMemcpy(ds, src.data(), src.size() * 2, cudaMemcpyHostToDevice));
    ldsm_kernel<<<1, 32>>>(ds, valid_rows, dout);
    TESSERA_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<std::uint32_t> out(4 * 32 * 4);
    TESSERA_CUDA_CHECK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
    // element (row, col) of global memory after zero-fill
    auto val = [&](int r, int c) -> std::uint32_t { return r < valid_rows ? src[r * 64 + c] : 0u; };
    for (int lane = 0; lane < 32; ++lane) {
      for (int i = 0; i < 4; ++i) {
        const int chunk = (i + 1) % 8;  // matrix i was addressed by lanes 8i..8i+7 with chunk (i + 1) % 8
        const int r = 8 * i + lane / 4, c = chunk * 8 + 2 * (lane % 4);
        const std::uint32_t want = val(r, c) | (val(r, c + 1) << 16);
        EXPECT_EQ(out[(0 * 32 + lane) * 4 + i], want) << "x4 lane " << lane << " reg " << i;
        // .trans: lane holds column lane/4, rows 2(lane%4), 2(lane%4)+1 of matrix i
        const int tr = 8 * i + 2 * (lane % 4), tc = chunk * 8 + lane / 4;
        const std::uint32_t want_t = val(tr, tc) | (val(tr + 1, tc) << 16);
        EXPECT_EQ(out[(1 * 32 + lane) * 4 + i], want_t) << "x4.trans lane " << lane << " reg " << i;
        if (i < 2) {
          EXPECT_EQ(out[(2 * 32 + lane) * 4 + i], want) << "x2 lane " << lane << " reg " << i;
          EXPECT_EQ(out[(3 * 32 + lane) * 4 + i], want_t) << "x2.trans lane " << lane << " reg " << i;
        }
      }
    }
    cudaFree(ds), cudaFree(dout);
  }
}

TEST(Ptx, SwizzleIsAPermutationOfEachRowGroup) {
  // Host-side property (also runs without a GPU): within 8 consecutive rows, the 8 chunks at the same logical
  // column land in 8 different 16-byte bank groups, and each row's chunks stay inside the row.
  for (int r = 0; r < 16; ++r) {
    std::vector<bool> seen(16, false);
    for (int c = 0; c < 16; ++c) {
      const std::uint32_t off = swizzle_offset<16>(r, c);
      ASSERT_EQ(off / 256, std::uint32_t(r));
      seen[(off % 256) / 16] = true;
    }
    for (bool s : seen) ASSERT_TRUE(s);
  }
  for (int c = 0; c < 8; ++c) {
    std::vector<bool> bank(8, false);
    for (int r = 0; r < 8; ++r) bank[(swizzle_offset<8>(r, c) / 16) % 8] = true;
    for (bool b : bank) ASSERT_TRUE(b);
  }
}

}  // namespace
