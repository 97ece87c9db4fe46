#pragma once
/// @file request.hpp
/// One attention request: Q, K, V, the output O (and optionally LSE), the block geometry and the logical mask.
/// Computes E(M) of DESIGN.md section 1:
///   S(i) = { j : M[b, h, i / B_Q, j / B_KV] = 1 },  O[b,i,h,:] = sum_{j in S(i)} softmax_j(scale q_i.k_j) v_j,
///   LSE[b,h,i] = ln sum_{j in S(i)} exp(scale q_i.k_j); empty S(i) gives O = 0 and LSE = -inf.
#include <cstdint>
#include <optional>

#include "tessera/geometry.hpp"
#include "tessera/mask.hpp"
#include "tessera/tensor.hpp"

namespace tessera {

/// An attention request. Shapes (any strides on the first three dimensions, head dimension contiguous):
///   q   [B, N_q,  H_q,  D]  bf16 or fp16 (fp32/fp64 accepted by the reference paths only)
///   k,v [B, N_kv, H_kv, D]  same dtype as q; H_q % H_kv == 0 (GQA/MQA: query head h reads kv head h / (H_q/H_kv))
///   o   [B, N_q,  H_q,  D]  output, same dtype as q (the reference paths also accept fp32/fp64)
///   lse [B, H_q, N_q]       optional fp32 output, natural log; leave empty when not wanted
struct AttentionRequest {
  TensorView q, k, v, o;
  TensorView lse;
  BlockGeometry geometry;
  BlockMask mask;
  /// Softmax scale; default 1/sqrt(D). Held in float64: the CPU paths (run_cpu, the float64 reference) use it as
  /// given, the GPU kernels and the GPU reference rounded to float32 (their arithmetic is float32).
  std::optional<double> scale;

  /// The scale actually used: `scale` if given, else 1/sqrt(head_dim) (float64).
  double effective_scale() const noexcept;
};

/// Sizes of a request, read from its tensors (valid after validate_request()).
struct ProblemShape {
  std::int64_t batch = 0;     ///< B
  std::int64_t n_q = 0;       ///< N_q, query tokens
  std::int64_t n_kv = 0;      ///< N_kv, key/value tokens
  std::int64_t heads_q = 0;   ///< H_q
  std::int64_t heads_kv = 0;  ///< H_kv
  std::int64_t head_dim = 0;  ///< D
  std::int64_t n_qb = 0;      ///< ceil(N_q / B_Q)
  std::int64_t n_kvb = 0;     ///< ceil(N_kv / B_KV)
};

/// Options of validate_request().
struct ValidateOptions {
  /// Accept fp32/fp64 Q/K/V/O (reference paths). Kernels accept bf16/fp16 only. In this mode any head_dim from
  /// 1 to 512 is accepted (the reference paths are generic); otherwise head_dim must be 64 or 128 (96 and 256
  /// raise kUnsupported, "not yet supported").
  bool allow_reference_dtypes = false;
  /// Check mask contents (index ranges, sortedness, duplicates) for masks in CPU memory. Masks in GPU memory
  /// are checked on the device by build_mask_state_gpu() and reported back (same errors as the host check).
  bool check_host_mask_contents = true;
};

/// Checks a request against DESIGN.md section 2 without touching the GPU. Throws tessera::Error
/// (kInvalidArgument or kUnsupported) naming the argument ("q", "k.stride", "mask.col_indices",
/// "geometry.block_q", ...). Outputs must not share memory with inputs: O overlapping Q, K or V raises argument "o",
/// LSE overlapping Q, K, V or O raises "lse" ("memory overlaps q's ..."). Two views on one device overlap when their
/// byte extents [data, data + (largest element offset + 1) * dtype size) intersect, computed from the data pointer,
/// shape, strides and dtype size (conservative: interleaved views that share no element are rejected too).
/// Q, K and V may share memory. Returns the problem shape on success.
ProblemShape validate_request(const AttentionRequest& request, const ValidateOptions& options = {});

}  // namespace tessera
