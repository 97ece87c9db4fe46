#pragma once
// The CPU plan executor (DESIGN.md section 5): runs a prepared plan tile by tile from its launch metadata, in
// float64, exactly as a kernel would (online softmax per tile, membership masking, split-KV partials + LSE merge).
// It is the proof that a mapping preserves E(M), and the execution path where no GPU exists.
#include <optional>

#include "core/launch_prep.hpp"
#include "tessera/tensor.hpp"

namespace tessera {

/// Executes `md` (prepared for the same problem) on CPU tensors.
///   q    [B, N_q, H_q, D]   any floating dtype (f16, bf16, f32, f64), any strides
///   k, v [B, N_kv, H_kv, D] same
///   o    [B, N_q, H_q, D]   output, any floating dtype; every element is written
///   lse  [B, H_q, N_q]      optional output (f32 or f64), natural log; -inf for a query with no active key
/// scale: softmax scale (1/sqrt(D) when not given). Computation in float64; the output is rounded once.
/// Throws Error(kInvalidArgument) naming "q", "k", "v", "o" or "lse" when a tensor does not match the prepared
/// problem; nothing is written on error.
void execute_plan_cpu(const HostTileMetadata& md, const TensorView& q, const TensorView& k, const TensorView& v,
                      const TensorView& o, const TensorView& lse = {}, std::optional<double> scale = std::nullopt);

}  // namespace tessera
