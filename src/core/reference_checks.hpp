#pragma once
// Checks of the things the reference attention paths rely on (shapes, dtypes, devices, strides, geometry,
// mask-state extents). validate_request() is the library-wide check; these are the reference's own, so that it
// never reads or writes out of bounds whatever it is handed.
#include "tessera/mask_state.hpp"
#include "tessera/request.hpp"

namespace tessera::detail {

/// Which reference implementation a request is checked for.
enum class ReferencePath {
  kCpu,  ///< q/k/v in CPU memory, f16/bf16/f32/f64; o and lse ignored
  kGpu,  ///< q/k/v/o (and lse, if given) in GPU memory; q/k/v/o bf16/f16/f32, lse f32; head_dim <= 256
};

/// Largest head_dim the GPU reference supports.
inline constexpr std::int64_t kReferenceGpuMaxHeadDim = 256;

/// Checks q, k, v (and for kGpu: o, lse), the geometry and that `mask_shape` matches the request
/// (B_m in {1, B}, H_m in {1, H_q}, n_qb = ceil(N_q / B_Q), n_kvb = ceil(N_kv / B_KV)).
/// Throws Error(kInvalidArgument or kUnsupported) naming the argument. Returns the problem shape.
ProblemShape check_reference_request(const AttentionRequest& request, const MaskShape& mask_shape, ReferencePath path);

/// Checks a host block-CSR: row_offsets has rows + 1 entries, starts at 0, is non-decreasing and ends at
/// col_indices.size(); column indices are in [0, n_kvb) and strictly increasing within each row.
/// Throws Error(kInvalidArgument, "mask.row_offsets" / "mask.col_indices").
void check_host_mask_state(const HostMaskState& mask);

}  // namespace tessera::detail
