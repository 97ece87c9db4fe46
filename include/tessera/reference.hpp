#pragma once
/// @file reference.hpp
/// Reference attention: E(M) of DESIGN.md section 1, computed directly, against which every kernel, plan and
/// executor is checked.
///   S(i) = { j < N_kv : M[b, h, i / B_Q, j / B_KV] = 1 },
///   O[b, i, h, :] = sum_{j in S(i)} softmax_j(scale * q_i . k_j) v_j,   LSE[b, h, i] = ln sum_{j in S(i)} exp(...),
///   empty S(i): O = 0, LSE = -inf (never NaN). Query head h reads kv head h / (H_q / H_kv).
/// The mask is given as its canonical block-CSR state mu(M) (mask_state.hpp); request.mask is not read.
#include <vector>

#include "tessera/cuda_types.hpp"
#include "tessera/mask_state.hpp"
#include "tessera/mask_state_gpu.hpp"
#include "tessera/request.hpp"

namespace tessera {

/// Output of the float64 CPU reference.
struct ReferenceOutput {
  std::vector<double> o;    ///< [B, N_q, H_q, D], contiguous
  std::vector<double> lse;  ///< [B, H_q, N_q], contiguous; natural log; -inf where S(i) is empty
};

/// E(M) on the CPU with float64 accumulation (two-pass, numerically stable softmax per query token).
/// - request.q [B, N_q, H_q, D], request.k / request.v [B, N_kv, H_kv, D]: CPU memory, one dtype among
///   f16/bf16/f32/f64 (converted exactly to float64), any strides on the first three dimensions (BSHD, BHSD),
///   head dimension contiguous; H_q % H_kv == 0. Any head_dim >= 1.
/// - request.geometry: B_Q, B_KV multiples of 16 in [16, 1024]. Scale: request.effective_scale().
/// - mask: canonical block-CSR with shape (B_m in {1, B}, H_m in {1, H_q}, n_qb = ceil(N_q/B_Q),
///   n_kvb = ceil(N_kv/B_KV)); rows (b_m * H_m + h_m) * n_qb + qb; size-1 extents broadcast.
/// - request.o, request.lse and request.mask are ignored.
/// Work is spread over (b, h) with std::thread; the result does not depend on the thread count.
/// Throws tessera::Error(kInvalidArgument) naming the argument ("q.dtype", "k.shape", "geometry.block_q",
/// "mask.n_qb", "mask.col_indices", ...) on any violation.
ReferenceOutput reference_attention_cpu(const AttentionRequest& request, const HostMaskState& mask);

/// E(M) on the GPU in fp32 (plain online softmax on CUDA cores, no tensor cores): obviously correct, and fast
/// enough for full-size cases (tens of thousands of tokens, tens of heads: seconds). One CTA per
/// (16, 32 or 64 query rows of one query block, query head, batch) walks the row's active kv blocks from the
/// device block-CSR in gathered tiles of 64 kv tokens.
/// - request.q / k / v: GPU memory, one dtype among bf16/f16/f32, shapes and strides as for the CPU reference;
///   head_dim in [1, 256] (kUnsupported beyond).
/// - request.o [B, N_q, H_q, D]: GPU memory, bf16/f16/f32, any non-overlapping strides on the first three
///   dimensions, head dimension contiguous. Every element of the view is written (0 where S(i) is empty);
///   nothing outside it is.
/// - request.lse: optional (empty view = not wanted), fp32 [B, H_q, N_q] in GPU memory, any non-overlapping
///   strides; natural log, -inf where S(i) is empty.
/// - mask: canonical block-CSR in device memory (as built by build_mask_state_gpu()); it is trusted to be
///   canonical, only its shape and buffer sizes are checked.
/// Asynchronous on `stream`. Throws tessera::Error (kInvalidArgument / kUnsupported, naming the argument) before
/// any launch on a bad request, kCudaError when the launch fails.
void reference_attention_gpu(const AttentionRequest& request, const DeviceMaskState& mask, Stream stream);

}  // namespace tessera
