// GPU unit tests of the Hopper part of the PTX layer (src/kernels/ptx: mbarrier.cuh, tma.cuh, wgmma.cuh) and of the
// wgmma family's operands (consumer.cuh's qk_gemm, load_q_fragments + qk_gemm_rs, pv_gemm): mbarrier parity
// phases; TMA boxes through host-encoded tensor maps, including the zero fill of rows past the end and of a box
// wholly past the end (which must still complete its transaction bytes); S = Q K^T (wgmma SS, both operands
// K-major) and O += P V (wgmma RS, V MN-major) against host GEMMs for each catalog N; the swapped products of 16- and
// 32-row query tiles (consumer_swap.cuh: S^T = K Q^T, P^T staged by stmatrix.trans + fence.proxy.async, O^T += V^T P^T
// with A MN-major) likewise; stmatrix.trans and the predicated shared store (ptx/smem_store.cuh) by themselves.
// Skipped on GPUs other than compute capability 9.0 (the sm_90a instructions exist nowhere else).
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
#include "kernels/wgmma/consumer_swap.cuh"
#include "kernels/ptx/smem_store.cuh"
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

// Carves 1024-byte-aligned shared memory as Q [Cfg::kQBytes] | K [kKvBytes] | V [kKvBytes] | `extra` bytes | an
// mbarrier, TMA-loads the three operands (tensors [1, rows, 1, D], box at row 0) as the attention kernel's producer
// does and waits for them (every thread). Returns the base (Q).
template <class Cfg>
__device__ unsigned char* load_operands(const CUtensorMap& mq, const CUtensorMap& mk, const CUtensorMap& mv,
                                        std::size_t extra) {
  extern __shared__ __align__(16) unsigned char raw[];
  const std::uint32_t a = static_cast<std::uint32_t>(__cvta_generic_to_shared(raw));
  unsigned char* smem = raw + (((a + 1023u) & ~1023u) - a);
  unsigned char* sk = smem + Cfg::kQBytes;
  unsigned char* sv = sk + Cfg::kKvBytes;
  auto* bar = reinterpret_cast<std::uint64_t*>(sv + Cfg::kKvBytes + extra);
  if (threadIdx.x == 0) {
    ptx::mbarrier_init(bar, 1);
    ptx::fence_barrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    ptx::mbarrier_arrive_expect_tx(bar, Cfg::kQBytes + 2 * Cfg::kKvBytes);
    for (int panel = 0; panel < Cfg::kPanels; ++panel) {
      ptx::tma_load_4d(smem + panel * Cfg::kQPanelBytes, &mq, panel * 64, 0, 0, 0, bar);
      ptx::tma_load_4d(sk + panel * Cfg::kKvPanelBytes, &mk, panel * 64, 0, 0, 0, bar);
      ptx::tma_load_4d(sv + panel * Cfg::kKvPanelBytes, &mv, panel * 64, 0, 0, 0, bar);
    }
  }
  ptx::mbarrier_wait(bar, 0);
  return smem;
}

// One warpgroup: TMA-loads Q [64 x D], K [N x D] and V [N x D] (tensors [1, rows, 1, D]) as the attention kernel
// does, computes S = Q K^T with qk_gemm, then O = P V with pv_gemm where P = bf16(S * p_scale) built from the
// accumulators with pack_p; writes S and O (fp32, accumulator layout decoded) and P (as used). Also S again with Q's
// fragments read by load_q_fragments and qk_gemm_rs (wgmma RS, the kernel's kQInRegisters form) into s_rs_out.
template <class Cfg>
__global__ void __launch_bounds__(128) wgmma_gemm_kernel(const __grid_constant__ CUtensorMap mq,
                                                         const __grid_constant__ CUtensorMap mk,
                                                         const __grid_constant__ CUtensorMap mv, float p_scale,
                                                         float* s_out, float* p_out, float* o_out, float* s_rs_out) {
  using T = typename Cfg::Elem;
  constexpr int N = Cfg::TKV, D = Cfg::D;
  unsigned char* smem = load_operands<Cfg>(mq, mk, mv, 0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t2 = 2 * (lane % 4);
  const std::uint32_t base = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  {
    std::uint32_t qf[D / 16][4];
    kernels::wgmma::load_q_fragments<Cfg>(qf, base, warp, lane);
    float s_rs[N / 2];
    kernels::wgmma::qk_gemm_rs<Cfg>(s_rs, qf, base + Cfg::kQBytes);
    ptx::wgmma_commit();
    ptx::wgmma_wait<0>();
    kernels::wgmma::fence_all(s_rs);
    for (int i = 0; i < N / 8; ++i)
      for (int k = 0; k < 4; ++k) s_rs_out[(16 * warp + g + 8 * (k / 2)) * N + 8 * i + t2 + k % 2] = s_rs[4 * i + k];
  }
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

/// Random Q [q_rows x D], K and V [kv_rows x D] (tensors [1, rows, 1, D]) on the host and the device, with their
/// tensor maps (one box of all rows).
template <class T, int D>
struct Operands {
  std::vector<std::uint16_t> q, k, v;
  DeviceBuffer dq, dk, dv;
  CUtensorMap mq, mk, mv;
  Operands(std::mt19937_64& rng, int q_rows, int kv_rows)
      : q(make(rng, q_rows)), k(make(rng, kv_rows)), v(make(rng, kv_rows)), dq(upload(q)), dk(upload(k)),
        dv(upload(v)), mq(map_of(dq, q_rows)), mk(map_of(dk, kv_rows)), mv(map_of(dv, kv_rows)) {}
  static std::vector<std::uint16_t> make(std::mt19937_64& rng, int rows) {
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<std::uint16_t> x(std::size_t(rows) * D);
    for (auto& e : x) e = to_bits<T>(nd(rng));
    return x;
  }
  static DeviceBuffer upload(const std::vector<std::uint16_t>& h) {
    DeviceBuffer d(h.size() * 2);
    TESSERA_CUDA_CHECK(cudaMemcpy(d.data(), h.data(), h.size() * 2, cudaMemcpyHostToDevice));
    return d;
  }
  static CUtensorMap map_of(const DeviceBuffer& b, int rows) {
    TensorMapSpec s;
    s.base = b.data();
    s.dtype = std::is_same_v<T, __half> ? DType::kFloat16 : DType::kBFloat16;
    s.batch = 1, s.tokens = rows, s.heads = 1, s.head_dim = D;
    s.stride_b = std::int64_t(rows) * D, s.stride_n = D, s.stride_h = D;
    s.box_rows = rows;
    CUtensorMap m;
    encode_tensor_map(m, s, "operand");
    return m;
  }
};

template <class T, int D, int N>
void check_gemms(std::uint64_t seed) {
  using Cfg = kernels::wgmma::Config<T, D, 64, N, 8, 1>;
  SCOPED_TRACE("D " + std::to_string(D) + " N " + std::to_string(N));
  std::mt19937_64 rng(seed);
  const Operands<T, D> ops(rng, 64, N);
  const auto &q = ops.q, &k = ops.k, &v = ops.v;
  const CUtensorMap &mq = ops.mq, &mk = ops.mk, &mv = ops.mv;
  DeviceBuffer ds(64 * N * 4), dp(64 * N * 4), d_o(64 * D * 4), ds_rs(64 * N * 4);
  const std::size_t smem = Cfg::kQBytes + 2 * Cfg::kKvBytes + 8 + 1024;
  auto* fn = &wgmma_gemm_kernel<Cfg>;
  TESSERA_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const float p_scale = 0.125f;
  fn<<<1, 128, smem>>>(mq, mk, mv, p_scale, ds.as<float>(), dp.as<float>(), d_o.as<float>(), ds_rs.as<float>());
  TESSERA_CUDA_CHECK_LAUNCH();
  std::vector<float> s(64 * N), p(64 * N), o(64 * D), s_rs(64 * N);
  TESSERA_CUDA_CHECK(cudaMemcpy(s.data(), ds.data(), s.size() * 4, cudaMemcpyDeviceToHost));
  TESSERA_CUDA_CHECK(cudaMemcpy(s_rs.data(), ds_rs.data(), s_rs.size() * 4, cudaMemcpyDeviceToHost));
  TESSERA_CUDA_CHECK(cudaMemcpy(p.data(), dp.data(), p.size() * 4, cudaMemcpyDeviceToHost));
  TESSERA_CUDA_CHECK(cudaMemcpy(o.data(), d_o.data(), o.size() * 4, cudaMemcpyDeviceToHost));
  double es = 0, ns = 0, eo = 0, no = 0, es_rs = 0;
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < N; ++c) {
      double ref = 0;
      for (int x = 0; x < D; ++x) ref += double(from_bits<T>(q[r * D + x])) * from_bits<T>(k[c * D + x]);
      es += (s[r * N + c] - ref) * (s[r * N + c] - ref), ns += ref * ref;
      es_rs += (s_rs[r * N + c] - ref) * (s_rs[r * N + c] - ref);
    }
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < D; ++c) {
      double ref = 0;
      for (int x = 0; x < N; ++x) ref += double(p[r * N + x]) * from_bits<T>(v[x * D + c]);
      eo += (o[r * D + c] - ref) * (o[r * D + c] - ref), no += ref * ref;
    }
  EXPECT_LE(std::sqrt(es / ns), 1e-5) << "S = Q K^T (wgmma SS, K-major descriptors)";
  EXPECT_LE(std::sqrt(es_rs / ns), 1e-5) << "S = Q K^T (wgmma RS: load_q_fragments from the swizzled Q panels)";
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

// ---- shared-memory stores of the swapped consumer ------------------------------------------------------------------

// One warp: lane l holds element (l / 4, 2 (l % 4) + e) of matrix j as the value j * 64 + row * 8 + col, stores the
// four matrices with stmatrix.x4.trans to rows of 16 bytes (row m of matrix j at (8 j + m) * 16 bytes) and copies them
// out: out[j * 64 + m * 8 + r] must be element (r, m) of matrix j.
__global__ void stmatrix_trans_kernel(std::uint16_t* out) {
  __shared__ alignas(128) std::uint16_t buf[4 * 64];
  const int lane = threadIdx.x, r = lane / 4, c = 2 * (lane % 4);
  std::uint32_t regs[4];
  for (int j = 0; j < 4; ++j)
    regs[j] = std::uint32_t(j * 64 + r * 8 + c) | (std::uint32_t(j * 64 + r * 8 + c + 1) << 16);
  const std::uint32_t base = static_cast<std::uint32_t>(__cvta_generic_to_shared(buf));
  ptx::stmatrix_x4_trans(base + lane * 16, regs);
  __syncwarp();
  for (int i = lane; i < 4 * 64; i += 32) out[i] = buf[i];
}

TEST(PtxSm90, StmatrixTransStoresEachMatrixTransposed) {
  TESSERA_REQUIRE_SM90();
  DeviceBuffer d(4 * 64 * 2);
  stmatrix_trans_kernel<<<1, 32>>>(d.as<std::uint16_t>());
  TESSERA_CUDA_CHECK_LAUNCH();
  std::vector<std::uint16_t> h(4 * 64);
  TESSERA_CUDA_CHECK(cudaMemcpy(h.data(), d.data(), h.size() * 2, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int j = 0; j < 4; ++j)
    for (int m = 0; m < 8; ++m)
      for (int r = 0; r < 8; ++r) {
        const int want = j * 64 + r * 8 + m, got = h[j * 64 + m * 8 + r];
        if (got != want && bad++ < 3) ADD_FAILURE() << "matrix " << j << " row " << m << " col " << r << ": " << got;
      }
  EXPECT_EQ(bad, 0);
}

// 64 threads: thread i stores (i, -i) to slot i when i % 3 == 0; the other slots keep their fill.
__global__ void st_shared_if_kernel(float* out) {
  __shared__ alignas(8) float buf[2 * 64];
  for (int i = threadIdx.x; i < 2 * 64; i += blockDim.x) buf[i] = 7.f;
  __syncthreads();
  const int i = threadIdx.x;
  ptx::st_shared_v2_f32_if(static_cast<std::uint32_t>(__cvta_generic_to_shared(buf + 2 * i)), float(i), -float(i),
                           i % 3 == 0);
  __syncthreads();
  for (int k = threadIdx.x; k < 2 * 64; k += blockDim.x) out[k] = buf[k];
}

TEST(PtxSm90, PredicatedSharedStoreWritesOnlyWhereThePredicateHolds) {
  TESSERA_REQUIRE_SM90();
  DeviceBuffer d(2 * 64 * 4);
  st_shared_if_kernel<<<1, 64>>>(d.as<float>());
  TESSERA_CUDA_CHECK_LAUNCH();
  std::vector<float> h(2 * 64);
  TESSERA_CUDA_CHECK(cudaMemcpy(h.data(), d.data(), h.size() * 4, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(h[2 * i], i % 3 == 0 ? float(i) : 7.f) << i;
    EXPECT_EQ(h[2 * i + 1], i % 3 == 0 ? -float(i) : 7.f) << i;
  }
}

// ---- the swapped products through the swapped consumer's own functions -------------------------------------------

// One warpgroup: TMA-loads Q [T_Q x D], K [64 x D] and V [64 x D], computes S^T = K Q^T with qk_swap_gemm, scales it
// by p_scale, stages P^T = T(S^T * p_scale) with stage_p (stmatrix.trans, fence.proxy.async, named barrier) and
// computes O^T = V^T P^T with pv_swap_gemm; writes S^T [64][T_Q], P (as used, [64][T_Q]) and O^T [D][T_Q].
template <class Cfg>
__global__ void __launch_bounds__(128) wgmma_swap_kernel(const __grid_constant__ CUtensorMap mq,
                                                         const __grid_constant__ CUtensorMap mk,
                                                         const __grid_constant__ CUtensorMap mv, float p_scale,
                                                         float* s_out, float* p_out, float* o_out) {
  using T = typename Cfg::Elem;
  constexpr int TQ = Cfg::TQ;
  unsigned char* sq = load_operands<Cfg>(mq, mk, mv, Cfg::kPBytes);
  unsigned char* sk = sq + Cfg::kQBytes;
  unsigned char* sv = sk + Cfg::kKvBytes;
  unsigned char* sp = sv + Cfg::kKvBytes;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t2 = 2 * (lane % 4);
  auto sh = [](const void* x) { return static_cast<std::uint32_t>(__cvta_generic_to_shared(x)); };
  float s[TQ / 2];
  kernels::wgmma::qk_swap_gemm<Cfg>(s, sh(sq), sh(sk));
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
  kernels::wgmma::fence_all(s);
  for (int i = 0; i < TQ / 8; ++i)
    for (int k = 0; k < 4; ++k) {
      const int r = 16 * warp + g + 8 * (k / 2), c = 8 * i + t2 + k % 2;
      s_out[r * TQ + c] = s[4 * i + k];
      s[4 * i + k] *= p_scale;
      p_out[r * TQ + c] = static_cast<float>(T(s[4 * i + k]));
    }
  kernels::wgmma::stage_p<Cfg>(s, sh(sp), warp, lane);
  float o[Cfg::kMBlocks][TQ / 2];
  for (int mb = 0; mb < Cfg::kMBlocks; ++mb)
    for (int i = 0; i < TQ / 2; ++i) o[mb][i] = 0.f;
  for (int mb = 0; mb < Cfg::kMBlocks; ++mb) kernels::wgmma::fence_all(o[mb]);
  kernels::wgmma::pv_swap_gemm<Cfg>(o, sh(sv), sh(sp));
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
  for (int mb = 0; mb < Cfg::kMBlocks; ++mb) kernels::wgmma::fence_all(o[mb]);
  for (int mb = 0; mb < Cfg::kMBlocks; ++mb)
    for (int i = 0; i < TQ / 8; ++i)
      for (int k = 0; k < 4; ++k)
        o_out[(64 * mb + 16 * warp + g + 8 * (k / 2)) * TQ + 8 * i + t2 + k % 2] = o[mb][4 * i + k];
}

template <class T, int D, int TQ>
void check_swap_gemms(std::uint64_t seed) {
  using Cfg = kernels::wgmma::Config<T, D, TQ, 64, 8, 2>;
  constexpr int KV = 64;
  SCOPED_TRACE("D " + std::to_string(D) + " T_Q " + std::to_string(TQ));
  std::mt19937_64 rng(seed);
  const Operands<T, D> ops(rng, TQ, KV);
  const auto &q = ops.q, &k = ops.k, &v = ops.v;
  const CUtensorMap &mq = ops.mq, &mk = ops.mk, &mv = ops.mv;
  DeviceBuffer ds(KV * TQ * 4), dp(KV * TQ * 4), d_o(D * TQ * 4);
  const std::size_t smem = Cfg::kQBytes + 2 * Cfg::kKvBytes + Cfg::kPBytes + 8 + 1024;
  auto* fn = &wgmma_swap_kernel<Cfg>;
  TESSERA_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const float p_scale = 0.125f;
  fn<<<1, 128, smem>>>(mq, mk, mv, p_scale, ds.as<float>(), dp.as<float>(), d_o.as<float>());
  TESSERA_CUDA_CHECK_LAUNCH();
  std::vector<float> s(KV * TQ), p(KV * TQ), o(D * TQ);
  TESSERA_CUDA_CHECK(cudaMemcpy(s.data(), ds.data(), s.size() * 4, cudaMemcpyDeviceToHost));
  TESSERA_CUDA_CHECK(cudaMemcpy(p.data(), dp.data(), p.size() * 4, cudaMemcpyDeviceToHost));
  TESSERA_CUDA_CHECK(cudaMemcpy(o.data(), d_o.data(), o.size() * 4, cudaMemcpyDeviceToHost));
  double es = 0, ns = 0, eo = 0, no = 0;
  for (int r = 0; r < KV; ++r)
    for (int c = 0; c < TQ; ++c) {
      double ref = 0;
      for (int x = 0; x < D; ++x) ref += double(from_bits<T>(k[r * D + x])) * from_bits<T>(q[c * D + x]);
      es += (s[r * TQ + c] - ref) * (s[r * TQ + c] - ref), ns += ref * ref;
    }
  for (int r = 0; r < D; ++r)
    for (int c = 0; c < TQ; ++c) {
      double ref = 0;
      for (int x = 0; x < KV; ++x) ref += double(from_bits<T>(v[x * D + r])) * p[x * TQ + c];
      eo += (o[r * TQ + c] - ref) * (o[r * TQ + c] - ref), no += ref * ref;
    }
  EXPECT_LE(std::sqrt(es / ns), 1e-5) << "S^T = K Q^T (wgmma SS m64nT_Qk16, K-major descriptors)";
  EXPECT_LE(std::sqrt(eo / no), 1e-5) << "O^T = V^T P^T (wgmma SS, A = V MN-major, P^T staged by stmatrix.trans)";
}

TEST(PtxSm90, SwappedWgmmaQkAndPvMatchHostGemms) {
  TESSERA_REQUIRE_SM90();
  const std::uint64_t seed = static_cast<std::uint64_t>(time(nullptr));
  check_swap_gemms<__nv_bfloat16, 128, 16>(seed);
  check_swap_gemms<__nv_bfloat16, 128, 32>(seed + 1);
  check_swap_gemms<__nv_bfloat16, 64, 16>(seed + 2);
  check_swap_gemms<__nv_bfloat16, 64, 32>(seed + 3);
  check_swap_gemms<__half, 128, 32>(seed + 4);
  check_swap_gemms<__half, 64, 16>(seed + 5);
}

}  // namespace
