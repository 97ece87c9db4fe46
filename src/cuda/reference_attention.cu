// E(M) on the GPU in fp32 (DESIGN.md section 1): the obviously-correct reference for full-size cases.
//
// One CTA per (BM query rows of one query block, query head h, batch b); BM in {16, 32, 64} divides B_Q, so a
// CTA's rows share one mask row and therefore one set S(i). The CTA walks the row's active kv blocks (device
// block-CSR) as one gathered sequence of kv tokens: position p of the row is token
// col_indices[begin + p / B_KV] * B_KV + p % B_KV, and the sequence stops at N_kv (only the last kv block can be
// ragged, and it sorts last). Tiles of 64 positions:
//   S = Q K^T (fp32 FMAs on CUDA cores, 4x4 scores per thread), masked to -inf past the row's last position;
//   online softmax per query row (running max m, running sum l, O rescaled by exp(m_old - m_new));
//   O += P V.
// The epilogue writes O / l and LSE = m + ln l, or O = 0 and LSE = -inf when the row has no active block.
// Thread layout: BM * 4 threads, tx = tid % 16, ty = tid / 16; thread (ty, tx) owns query rows 4ty..4ty+3,
// score columns 4tx..4tx+3 and O columns {64g + 4tx + e}. The 16 threads of a row group are one half-warp, so row
// reductions are 4 xor-shuffles. Head dimension padded with zeros to DPAD in {64, 128, 256}.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "core/reference_checks.hpp"
#include "cuda/check.cuh"
#include "tessera/error.hpp"
#include "tessera/reference.hpp"

namespace tessera {
namespace {

constexpr int kBN = 64;  // kv positions per tile

enum ElemType : int { kElemF32 = 0, kElemBF16 = 1, kElemF16 = 2 };

struct RefParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;  // null: not wanted
  int in_type, out_type;
  std::int64_t q_s0, q_s1, q_s2;
  std::int64_t k_s0, k_s1, k_s2;
  std::int64_t v_s0, v_s1, v_s2;
  std::int64_t o_s0, o_s1, o_s2;
  std::int64_t lse_s0, lse_s1, lse_s2;
  int n_q, n_kv, group, head_dim;
  int block_q, block_kv, n_qb, n_kvb;
  int mask_batch, mask_heads;
  const int* row_offsets;
  const int* col_indices;
  float scale;
};

__device__ __forceinline__ float load_elem(const void* base, int type, std::int64_t off) {
  if (type == kElemF32) return static_cast<const float*>(base)[off];
  if (type == kElemBF16) return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[off]);
  return __half2float(static_cast<const __half*>(base)[off]);
}

__device__ __forceinline__ void store_elem(void* base, int type, std::int64_t off, float x) {
  if (type == kElemF32) {
    static_cast<float*>(base)[off] = x;
  } else if (type == kElemBF16) {
    static_cast<__nv_bfloat16*>(base)[off] = __float2bfloat16_rn(x);
  } else {
    static_cast<__half*>(base)[off] = __float2half_rn(x);
  }
}

/// Shared memory floats of one CTA: qT [DPAD][BM+4], kT [DPAD][64+4] / v [64][DPAD] (one buffer),
/// pT [64][BM+4], token indices [64].
constexpr int smem_floats(int bm, int dpad) { return dpad * (bm + 4) + dpad * (kBN + 4) + kBN * (bm + 4) + kBN; }

template <int BM, int DPAD>
__global__ void __launch_bounds__(BM * 4) reference_attention_kernel(const RefParams p) {
  constexpr int kThreads = BM * 4;
  constexpr int QS = BM + 4;   // row stride of qT and pT (floats; multiple of 4 for float4 access)
  constexpr int KS = kBN + 4;  // row stride of kT
  constexpr int kGroups = DPAD / 64;  // float4 groups of O columns per thread
  extern __shared__ float4 smem4[];
  float* qT = reinterpret_cast<float*>(smem4);
  float* kv = qT + DPAD * QS;
  float* pT = kv + DPAD * KS;
  int* tok = reinterpret_cast<int*>(pT + kBN * QS);

  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;
  const int tiles_per_block = p.block_q / BM;
  const int qb = blockIdx.x / tiles_per_block;
  const int row_start = qb * p.block_q + (blockIdx.x % tiles_per_block) * BM;
  if (row_start >= p.n_q) return;  // whole CTA past N_q (ragged last query block)
  const int rows = min(BM, p.n_q - row_start);
  const int h = blockIdx.y, b = blockIdx.z;
  const int hk = h / p.group;
  const int mask_row = ((p.mask_batch == 1 ? 0 : b) * p.mask_heads + (p.mask_heads == 1 ? 0 : h)) * p.n_qb + qb;
  const int a_begin = p.row_offsets[mask_row];
  const int n_active = p.row_offsets[mask_row + 1] - a_begin;
  int positions = n_active * p.block_kv;
  if (n_active > 0 && p.col_indices[a_begin + n_active - 1] == p.n_kvb - 1)
    positions -= p.n_kvb * p.block_kv - p.n_kv;  // the ragged last kv block

  // Q tile, transposed, zero past the valid rows and past head_dim.
  for (int idx = tid; idx < BM * DPAD; idx += kThreads) {
    const int r = idx / DPAD, d = idx % DPAD;
    float x = 0.f;
    if (r < rows && d < p.head_dim)
      x = load_elem(p.q, p.in_type, b * p.q_s0 + static_cast<std::int64_t>(row_start + r) * p.q_s1 + h * p.q_s2 + d);
    qT[d * QS + r] = x;
  }

  float m[4], l[4], acc[4][4 * kGroups];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.f;
#pragma unroll
    for (int c = 0; c < 4 * kGroups; ++c) acc[i][c] = 0.f;
  }

  for (int t0 = 0; t0 < positions; t0 += kBN) {
    __syncthreads();  // the previous tile is done with kv, pT and tok (first tile: qT is complete)
    if (tid < kBN) {
      const int pos = t0 + tid;
      tok[tid] = pos < positions ? p.col_indices[a_begin + pos / p.block_kv] * p.block_kv + pos % p.block_kv : -1;
    }
    __syncthreads();
    for (int idx = tid; idx < kBN * DPAD; idx += kThreads) {  // K tile, transposed: kT[d][c]
      const int c = idx / DPAD, d = idx % DPAD;
      const int j = tok[c];
      float x = 0.f;
      if (j >= 0 && d < p.head_dim)
        x = load_elem(p.k, p.in_type, b * p.k_s0 + static_cast<std::int64_t>(j) * p.k_s1 + hk * p.k_s2 + d);
      kv[d * KS + c] = x;
    }
    __syncthreads();

    float s[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int c = 0; c < 4; ++c) s[i][c] = 0.f;
#pragma unroll 8
    for (int d = 0; d < DPAD; ++d) {
      const float4 qa = *reinterpret_cast<const float4*>(&qT[d * QS + ty * 4]);
      const float4 ka = *reinterpret_cast<const float4*>(&kv[d * KS + tx * 4]);
      const float qv[4] = {qa.x, qa.y, qa.z, qa.w};
      const float kk[4] = {ka.x, ka.y, ka.z, ka.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int c = 0; c < 4; ++c) s[i][c] = fmaf(qv[i], kk[c], s[i][c]);
    }

    // Online softmax over this tile. Every tile holds at least one valid position, so the new max is finite.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float mt = -INFINITY;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        s[i][c] = tok[tx * 4 + c] >= 0 ? s[i][c] * p.scale : -INFINITY;
        mt = fmaxf(mt, s[i][c]);
      }
#pragma unroll
      for (int off = 8; off >= 1; off >>= 1) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, off));
      const float m_new = fmaxf(m[i], mt);
      const float alpha = expf(m[i] - m_new);  // 0 on the first tile (m = -inf)
      float rs = 0.f;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        s[i][c] = expf(s[i][c] - m_new);  // masked positions: exp(-inf) = 0
        rs += s[i][c];
      }
#pragma unroll
      for (int off = 8; off >= 1; off >>= 1) rs += __shfl_xor_sync(0xffffffffu, rs, off);
      l[i] = l[i] * alpha + rs;
      m[i] = m_new;
#pragma unroll
      for (int c = 0; c < 4 * kGroups; ++c) acc[i][c] *= alpha;
    }
#pragma unroll
    for (int c = 0; c < 4; ++c)
      *reinterpret_cast<float4*>(&pT[(tx * 4 + c) * QS + ty * 4]) = make_float4(s[0][c], s[1][c], s[2][c], s[3][c]);
    __syncthreads();  // kT no longer read; pT complete

    for (int idx = tid; idx < kBN * DPAD; idx += kThreads) {  // V tile: v[c][d]
      const int c = idx / DPAD, d = idx % DPAD;
      const int j = tok[c];
      float x = 0.f;
      if (j >= 0 && d < p.head_dim)
        x = load_elem(p.v, p.in_type, b * p.v_s0 + static_cast<std::int64_t>(j) * p.v_s1 + hk * p.v_s2 + d);
      kv[c * DPAD + d] = x;
    }
    __syncthreads();
#pragma unroll 4
    for (int c = 0; c < kBN; ++c) {
      const float4 pa = *reinterpret_cast<const float4*>(&pT[c * QS + ty * 4]);
      const float pv[4] = {pa.x, pa.y, pa.z, pa.w};
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        const float4 va = *reinterpret_cast<const float4*>(&kv[c * DPAD + g * 64 + tx * 4]);
        const float vv[4] = {va.x, va.y, va.z, va.w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][g * 4 + e] = fmaf(pv[i], vv[e], acc[i][g * 4 + e]);
      }
    }
  }

  // Epilogue: rows with no active block (positions == 0) get O = 0 and LSE = -inf.
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = ty * 4 + i;
    if (r >= rows) continue;
    const int token = row_start + r;
    const float inv_l = positions > 0 ? 1.f / l[i] : 0.f;
    const std::int64_t o_row = b * p.o_s0 + static_cast<std::int64_t>(token) * p.o_s1 + h * p.o_s2;
#pragma unroll
    for (int g = 0; g < kGroups; ++g)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int d = g * 64 + tx * 4 + e;
        if (d < p.head_dim) store_elem(p.o, p.out_type, o_row + d, acc[i][g * 4 + e] * inv_l);
      }
    if (p.lse != nullptr && tx == 0)
      p.lse[b * p.lse_s0 + h * p.lse_s1 + static_cast<std::int64_t>(token) * p.lse_s2] =
          positions > 0 ? m[i] + logf(l[i]) : -INFINITY;
  }
}

int elem_type(DType t) {
  switch (t) {
    case DType::kFloat32: return kElemF32;
    case DType::kBFloat16: return kElemBF16;
    case DType::kFloat16: return kElemF16;
    default: throw Error(ErrorCode::kInternal, "", "reference_attention_gpu: unexpected dtype");
  }
}

template <int BM, int DPAD>
void launch(const RefParams& p, dim3 grid, Stream stream) {
  constexpr std::size_t smem = sizeof(float) * smem_floats(BM, DPAD);
  auto kernel = reference_attention_kernel<BM, DPAD>;
  TESSERA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  kernel<<<grid, BM * 4, smem, stream>>>(p);
  TESSERA_CUDA_CHECK_LAUNCH();
}

template <int BM>
void launch_bm(const RefParams& p, dim3 grid, Stream stream) {
  if (p.head_dim <= 64) return launch<BM, 64>(p, grid, stream);
  if (p.head_dim <= 128) return launch<BM, 128>(p, grid, stream);
  return launch<BM, 256>(p, grid, stream);
}

std::int64_t lse_stride(const TensorView& t, int dim) { return t.empty() ? 0 : t.stride[dim]; }

}  // namespace

void reference_attention_gpu(const AttentionRequest& request, const DeviceMaskState& mask, Stream stream) {
  // TODO(lead, at merge): also call validate_request(request, {.allow_reference_dtypes = true}).
  const ProblemShape s = detail::check_reference_request(request, mask.shape, detail::ReferencePath::kGpu);
  const std::int64_t rows = mask.shape.rows();
  if (mask.nnz < 0 || mask.nnz > INT32_MAX)
    throw Error(ErrorCode::kInvalidArgument, "mask.nnz", "must be in [0, 2^31), got " + std::to_string(mask.nnz));
  if (mask.row_offsets.bytes() < static_cast<std::size_t>(rows + 1) * sizeof(std::int32_t))
    throw Error(ErrorCode::kInvalidArgument, "mask.row_offsets",
                "device buffer holds " + std::to_string(mask.row_offsets.bytes()) + " bytes, needs rows + 1 = " +
                    std::to_string(rows + 1) + " int32");
  if (mask.col_indices.bytes() < static_cast<std::size_t>(mask.nnz) * sizeof(std::int32_t))
    throw Error(ErrorCode::kInvalidArgument, "mask.col_indices",
                "device buffer holds " + std::to_string(mask.col_indices.bytes()) + " bytes, needs nnz = " +
                    std::to_string(mask.nnz) + " int32");
  if (s.n_q > INT32_MAX / 2 || s.n_kv > INT32_MAX / 2)
    throw Error(ErrorCode::kUnsupported, "q.shape", "the GPU reference supports up to 2^30 tokens");
  if (s.heads_q > 65535 || s.batch > 65535)
    throw Error(ErrorCode::kUnsupported, "q.shape", "the GPU reference supports B <= 65535 and H_q <= 65535");
  if (s.batch == 0 || s.n_q == 0 || s.heads_q == 0) return;  // nothing to write

  RefParams p{};
  p.q = request.q.data;
  p.k = request.k.data;
  p.v = request.v.data;
  p.o = request.o.data;
  p.lse = request.lse.empty() ? nullptr : static_cast<float*>(request.lse.data);
  p.in_type = elem_type(request.q.dtype);
  p.out_type = elem_type(request.o.dtype);
  p.q_s0 = request.q.stride[0], p.q_s1 = request.q.stride[1], p.q_s2 = request.q.stride[2];
  p.k_s0 = request.k.stride[0], p.k_s1 = request.k.stride[1], p.k_s2 = request.k.stride[2];
  p.v_s0 = request.v.stride[0], p.v_s1 = request.v.stride[1], p.v_s2 = request.v.stride[2];
  p.o_s0 = request.o.stride[0], p.o_s1 = request.o.stride[1], p.o_s2 = request.o.stride[2];
  p.lse_s0 = lse_stride(request.lse, 0), p.lse_s1 = lse_stride(request.lse, 1), p.lse_s2 = lse_stride(request.lse, 2);
  p.n_q = static_cast<int>(s.n_q);
  p.n_kv = static_cast<int>(s.n_kv);
  p.group = static_cast<int>(s.heads_q / s.heads_kv);
  p.head_dim = static_cast<int>(s.head_dim);
  p.block_q = request.geometry.block_q;
  p.block_kv = request.geometry.block_kv;
  p.n_qb = static_cast<int>(s.n_qb);
  p.n_kvb = static_cast<int>(s.n_kvb);
  p.mask_batch = static_cast<int>(mask.shape.batch);
  p.mask_heads = static_cast<int>(mask.shape.heads);
  p.row_offsets = mask.row_offsets.as<const int>();
  p.col_indices = mask.col_indices.as<const int>();
  p.scale = static_cast<float>(request.effective_scale());  // float32 arithmetic

  const int bm = p.block_q % 64 == 0 ? 64 : p.block_q % 32 == 0 ? 32 : 16;
  const dim3 grid(static_cast<unsigned>(s.n_qb * (p.block_q / bm)), static_cast<unsigned>(s.heads_q),
                  static_cast<unsigned>(s.batch));
  if (bm == 64) return launch_bm<64>(p, grid, stream);
  if (bm == 32) return launch_bm<32>(p, grid, stream);
  return launch_bm<16>(p, grid, stream);
}

}  // namespace tessera
