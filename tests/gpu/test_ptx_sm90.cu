// GPU unit tests of the Hopper part of the PTX layer (src/kernels/ptx: mbarrier.cuh, tma.cuh, wgmma.cuh) and of the
// wgmma family's operand descriptors (src/kernels/wgmma/consumer.cuh's qk_gemm and pv_gemm): mbarrier parity
// phases; TMA boxes through host-encoded tensor maps, including the zero fill of rows past the end and of a box
// wholly past the end (which must still complete its transaction bytes); S = Q K^T (wgmma SS, both operands
// K-major) and O += P V (wgmma RS, V MN-major) against host GEMMs for each catalog N. Skipped on GPUs other than
// compute capability 9.0 (the sm_90a instructions exist nowhere else).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda/check.cuh"
#include "gpu_test_util.hpp"
#include "kernels/ptx/mbarrier.cuh"
#include "kernels/ptx/tma.cuh"
#include "kernels/ptx/wgmma.cuh"
#include "kernels/wgmma/config.cuh"
#include "kernels/wgmma/consumer.cuh"
#include "kernels/wgmma/tensor_map.hpp"
#include "tessera/cuda_types.hpp"

namespace {
using namespace tessera;
using tessera::kernels::wgmma::encode_tensor_map;
using tessera::kernels::wgmma::TensorMapSpec;

bool is_sm90() {
  if (cuda_device_count() == 0) return false;
  int dev = 0, major = 0, minor = 0;
  TESSERA_CUDA_CHECK(cudaGetDevice(&dev));
  TESSERA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  TESSERA_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  return major == 9 && minor == 0;
}

#define TESSERA_REQUIRE_SM90()                                                  \
  do {                                                                          \
    TESSERA_REQUIRE_GPU();                                                      \
    if (!is_sm90()) GTEST_SKIP() << "needs a compute capability 9.0 GPU (sm_90a)"; \
  } while (0)

// ---- mbarrier parity --------------------------------------------------------------------------------------------

// out[0..5]: try_wait(0), try_wait(1) on a fresh barrier; after one arrival (phase 0 completes); after a second.
__global__ void mbarrier_parity_kernel(int* out) {
  __shared__ alignas(8) std::uint64_t bar;
  ptx::mbarrier_init(&bar, 1);
  ptx::fence_barrier_init();
  out[0] = ptx::mbarrier_try_wait(&bar, 0);
  out[1] = ptx::mbarrier_try_wait(&bar, 1);
  ptx::mbarrier_arrive(&bar);
  out[2] = ptx::mbarrier_try_wait(&bar, 0);
  out[3] = ptx::mbarrier_try_wait(&bar, 1);
  ptx::mbarrier_arrive(&bar);
  out[4] = ptx::mbarrier_try_wait(&bar, 0);
  out[5] = ptx::mbarrier_try_wait(&bar, 1);
}

TEST(PtxSm90, MbarrierParityFlipsOncePerCompletedPhase) {
  TESSERA_REQUIRE_SM90();
  DeviceBuffer d(6 * sizeof(int));
  mbarrier_parity_kernel<<<1, 1>>>(d.as<int>());
  TESSERA_CUDA_CHECK_LAUNCH();
  std::vector<int> h(6);
  TESSERA_CUDA_CHECK(cudaMemcpy(h.data(), d.data(), 6 * sizeof(int), cudaMemcpyDeviceToHost));
  // Fresh: phase 0 in progress, so "parity 1" (the phase before) counts as complete.
  EXPECT_EQ(h[0], 0);
  EXPECT_EQ(h[1], 1);
  // Phase 0 complete, phase 1 in progress.
  EXPECT_EQ(h[2], 1);
  EXPECT_EQ(h[3], 0);
  // Phase 1 complete, phase 2 (parity 0) in progress.
  EXPECT_EQ(h[4], 0);
  EXPECT_EQ(h[5], 1);
}

// ---- TMA boxes ---------------------------------------------------------------------------------------------------

// Loads the box (0, row, head, batch) of `rows` rows x 64 columns (bf16) into 1024-byte-aligned shared memory and
// copies the shared bytes out unswizzled: out[r * 64 + c] = element (r, c) of the box.
template <int kRows>
__global__ void tma_box_kernel(const __grid_constant__ CUtensorMap map, int row, int head, int batch,
                               std::uint16_t* out) {
  __shared__ alignas(1024) unsigned char buf[kRows * 128];
  __shared__ alignas(8) std::uint64_t bar;
  if (threadIdx.x == 0) {
    ptx::mbarrier_init(&bar, 1);
    ptx::fence_barrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    ptx::mbarrier_arrive_expect_tx(&bar, kRows * 128);
    ptx::tma_load_4d(buf, &map, 0, row, head, batch, &bar);
  }
  ptx::mbarrier_wait(&bar, 0);
  for (int i = threadIdx.x; i < kRows * 64; i += blockDim.x) {
    const int r = i / 64, c = i % 64;
    // 128-byte swizzle: 16-byte chunk c / 8 of row r sits at chunk (c / 8) ^ (r % 8).
    const int chunk = (c / 8) ^ (r % 8);
    out[i] = *reinterpret_cast<const std::uint16_t*>(buf + r * 128 + chunk * 16 + (c % 8) * 2);
  }
}

TEST(PtxSm90, TmaBoxesZeroFillPastTheEndAndCompleteTheirBytes) {
  TESSERA_REQUIRE_SM90();
  // A [B = 2, N = 100, H = 3, D = 64] bf16 tensor stored BHSD (strided view of the 4-D map).
  const int B = 2, N = 100, H = 3, D = 64;
  std::vector<std::uint16_t> h(std::size_t(B) * N * H * D);
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<std::uint16_t>(i * 2654435761u >> 16) | 1u;
  DeviceBuffer d(h.size() * 2), out(32 * 64 * 2);
  TESSERA_CUDA_CHECK(cudaMemcpy(d.data(), h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  TensorMapSpec s;
  s.base = d.data();
  s.dtype = DType::kBFloat16;
  s.batch = B, s.tokens = N, s.heads = H, s.head_dim = D;
  s.stride_b = std::int64_t(H) * N * D, s.stride_n = D, s.stride_h = std::int64_t(N) * D;
  s.box_rows = 32;
  CUtensorMap map;
  encode_tensor_map(map, s, "x");
  auto elem = [&](int b, int n, int hh, int c) { return h[b * s.stride_b + n * s.stride_n + hh * s.stride_h + c]; };
  struct Box { int row, head, batch; };
  for (const Box bx : {Box{0, 0, 0}, Box{40, 2, 1}, Box{80, 1, 1}, Box{100, 0, 0}, Box{1000, 2, 1}}) {
    SCOPED_TRACE("row " + std::to_string(bx.row) + " head " + std::to_string(bx.head) + " batch " +
                 std::to_string(bx.batch));
    TESSERA_CUDA_CHECK(cudaMemset(out.data(), 0xff, out.bytes()));
    tma_box_kernel<32><<<1, 128>>>(map, bx.row, bx.head, bx.batch, out.as<std::uint16_t>());
    TESSERA_CUDA_CHECK_LAUNCH();
    std::vector<std::uint16_t> got(32 * 64);
    TESSERA_CUDA_CHECK(cudaMemcpy(got.data(), out.data(), got.size() * 2, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int r = 0; r < 32; ++r)
      for (int c = 0; c < 64; ++c) {
        const int n = bx.row + r;
        const std::uint16_t want = n < N ? elem(bx.batch, n, bx.head, c) : 0;
        if (got[r * 64 + c] != want && bad++ < 3) ADD_FAILURE() << "(" << r << ", " << c << "): " << got[r * 64 + c] << " != " << want;
      }
    EXPECT_EQ(bad, 0);
  }
}

// ---- wgmma through the attention kernel's descriptors -------------------------------------------------------------

// One warpgroup: TMA-loads Q [64 x D], K [N x D] and V [N x D] (tensors [1, rows, 1, D]) as the attention kernel
// does, computes S = Q K^T with qk_gemm, then O = P V with pv_gemm where P = bf16(S * p_scale) built from the
// accumulators with pack_p; writes S and O (fp32, accumulator layout decoded) and P (as used).
template <class Cfg>
__global__ void __launch_bounds__(128) wgmma_gemm_kernel(const __grid_constant__ CUtensorMap mq,
                                                         const __grid_constant__ CUtensorMap mk,
                                                         const __grid_constant__ CUtensorMap mv, float p_scale,
                                                         float* s_out, float* p_out, float* o_out) {
  using T = typename Cfg::Elem;
  constexpr int N = Cfg::TKV, D = Cfg::D;
  extern __shared__ __align__(16) unsigned char raw[];
  const std::uint32_t a = static_cast<std::uint32_t>(__cvta_generic_to_shared(raw));
  unsigned char* smem = raw + (((a + 1023u) & ~1023u) - a);
  unsigned char* sq = smem;
  unsigned char* sk = sq + Cfg::kQBytes;
  unsigned char* sv = sk + Cfg::kKvBytes;
  auto* bar = reinterpret_cast<std::uint64_t*>(sv + Cfg::kKvBytes);
  if (threadIdx.x == 0) {
    ptx::mbarrier_init(bar, 1);
    ptx::fence_barrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    ptx::mbarrier_arrive_expect_tx(bar, Cfg::kQBytes + 2 * Cfg::kKvBytes);
    for (int panel = 0; panel < Cfg::kPanels; ++panel) {
      ptx::tma_load_4d(sq + panel * Cfg::kQPanelBytes, &mq, panel * 64, 0, 0, 0, bar);
      ptx::tma_load_4d(sk + panel * Cfg::kKvPanelBytes, &mk, panel * 64, 0, 0, 0, bar);
      ptx::tma_load_4d(sv + panel * Cfg::kKvPanelBytes, &mv, panel * 64, 0, 0, 0, bar);
    }
  }
  ptx::mbarrier_wait(bar, 0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t2 = 2 * (lane % 4);
  const std::uint32_t base = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  float s[N / 2];
  kernels::wgmma::qk_gemm<Cfg>(s, base, base + Cfg::kQBytes);
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
  kernels::wgmma::fence_all(s);
  for (int i = 0; i < N / 8; ++i)
    for (int k = 0; k < 4; ++k) {
      const int r = 16 * warp + g + 8 * (k / 2), c = 8 * i + t2 + k % 2;
      s_out[r * N + c] = s[4 * i + k];
      s[4 * i + k] *= p_scale;
      p_out[r * N + c] = static_cast<float>(T(s[4 * i + k]));
    }
  std::uint32_t pf[N / 16][4];
  kernels::wgmma::pack_p<N, T>(s, pf);
  float o[D / 2];
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  kernels::wgmma::pv_gemm<Cfg>(o, pf, base + Cfg::kQBytes + Cfg::kKvBytes);
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
  kernels::wgmma::fence_all(o);
  for (int i = 0; i < D / 8; ++i)
    for (int k = 0; k < 4; ++k) o_out[(16 * warp + g + 8 * (k / 2)) * D + 8 * i + t2 + k % 2] = o[4 * i + k];
}

template <class T>
std::uint16_t to_bits(float x) {
  T v(x);
  return *reinterpret_cast<std::uint16_t*>(&v);
}
template <class T>
float from_bits(std::uint16_t b) {
  return static_cast<float>(*reinterpret_cast<T*>(&b));
}

template <class T, int D, int N>
void check_gemms(std::uint64_t seed) {
  using Cfg = kernels::wgmma::Config<T, D, 64, N, 8, 1>;
  SCOPED_TRACE("D " + std::to_string(D) + " N " + std::to_string(N));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto make = [&](int rows) {
    std::vector<std::uint16_t> v(std::size_t(rows) * D);
    for (auto& x : v) x = to_bits<T>(nd(rng));
    return v;
  };
  const auto q = make(64), k = make(N), v = make(N);
  DeviceBuffer dq(q.size() * 2), dk(k.size() * 2), dv(v.size() * 2);
  TESSERA_CUDA_CHECK(cudaMemcpy(dq.data(), q.data(), q.size() * 2, cudaMemcpyHostToDevice));
  TESSERA_CUDA_CHECK(cudaMemcpy(dk.data(), k.data(), k.size() * 2, cudaMemcpyHostToDevice));
  TESSERA_CUDA_CHECK(cudaMemcpy(dv.data(), v.data(), v.size() * 2, cudaMemcpyHostToDevice));
  auto map_of = [&](const DeviceBuffer& b, int rows) {
    TensorMapSpec s;
    s.base = b.data();
    s.dtype = std::is_same_v<T, __half> ? DType::kFloat16 : DType::kBFloat16;
    s.batch = 1, s.tokens = rows, s.heads = 1, s.head_dim = D;
    s.stride_b = std::int64_t(rows) * D, s.stride_n = D, s.stride_h = D;
    s.box_rows = rows;
    CUtensorMap m;
    encode_tensor_map(m, s, "operand");
    return m;
  };
  const CUtensorMap mq = map_of(dq, 64), mk = map_of(dk, N), mv = map_of(dv, N);
  DeviceBuffer ds(64 * N * 4), dp(64 * N * 4), d_o(64 * D * 4);
  const std::size_t smem = Cfg::kQBytes + 2 * Cfg::kKvBytes + 8 + 1024;
  auto* fn = &wgmma_gemm_kernel<Cfg>;
  TESSERA_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const float p_scale = 0.125f;
  fn<<<1, 128, smem>>>(mq, mk, mv, p_scale, ds.as<float>(), dp.as<float>(), d_o.as<float>());
  TESSERA_CUDA_CHECK_LAUNCH();
  std::vector<float> s(64 * N), p(64 * N), o(64 * D);
  TESSERA_CUDA_CHECK(cudaMemcpy(s.data(), ds.data(), s.size() * 4, cudaMemcpyDeviceToHost));
  TESSERA_CUDA_CHECK(cudaMemcpy(p.data(), dp.data(), p.size() * 4, cudaMemcpyDeviceToHost));
  TESSERA_CUDA_CHECK(cudaMemcpy(o.data(), d_o.data(), o.size() * 4, cudaMemcpyDeviceToHost));
  double es = 0, ns = 0, eo = 0, no = 0;
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < N; ++c) {
      double ref = 0;
      for (int x = 0; x < D; ++x) ref += double(from_bits<T>(q[r * D + x])) * from_bits<T>(k[c * D + x]);
      es += (s[r * N + c] - ref) * (s[r * N + c] - ref), ns += ref * ref;
    }
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < D; ++c) {
      double ref = 0;
      for (int x = 0; x < N; ++x) ref += double(p[r * N + x]) * from_bits<T>(v[x * D + c]);
      eo += (o[r * D + c] - ref) * (o[r * D + c] - ref), no += ref * ref;
    }
  EXPECT_LE(std::sqrt(es / ns), 1e-5) << "S = Q K^T (wgmma SS, K-major descriptors)";
  EXPECT_LE(std::sqrt(eo / no), 1e-5) << "O = P V (wgmma RS, MN-major V descriptor)";
}

TEST(PtxSm90, WgmmaQkAndPvMatchHostGemms) {
  TESSERA_REQUIRE_SM90();
  const std::uint64_t seed = static_cast<std::uint64_t>(time(nullptr));
  check_gemms<__nv_bfloat16, 128, 128>(seed);
  check_gemms<__nv_bfloat16, 128, 64>(seed + 1);
  check_gemms<__nv_bfloat16, 64, 128>(seed + 2);
  check_gemms<__nv_bfloat16, 64, 64>(seed + 3);
  check_gemms<__half, 128, 128>(seed + 4);
  check_gemms<__half, 64, 64>(seed + 5);
}

}  // namespace
