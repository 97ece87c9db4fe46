#pragma once
// One corpus case on the GPU for the tools: random bf16 Q/K/V [1, N, H, D], a poisoned output, the mask in
// device memory (dense uint8), plus helpers to time plans and check outputs against the GPU reference.
#include <string>
#include <vector>

#include "device_tensors.hpp"
#include "tessera/request.hpp"
#include "tessera/runtime.hpp"
#include "tessera_corpus/family.hpp"

namespace tessera::tools {

/// A corpus case with its tensors on the GPU.
struct GpuCase {
  corpus::CaseMeta meta;
  DeviceTensor q, k, v, o, mask;
  AttentionRequest request;
  double active_pairs = 0;  ///< active blocks x B_Q x B_KV over all heads (the FLOP convention of h200_baselines.md)

  /// 4 * D * active_pairs / time: effective TFLOP/s for a kernel time in milliseconds.
  double tflops(double ms) const { return ms > 0 ? 4.0 * 128 * active_pairs / (ms * 1e-3) / 1e12 : 0; }
};

/// Uploads case `c` with fresh random inputs (seed) and head_dim 128, bf16.
GpuCase make_gpu_case(const corpus::Case& c, std::uint64_t seed, Stream stream);

/// Median kernel time (ms) of `reps` runs of `plan_id` ("" = the runtime's selection), each poisoning O first.
double median_kernel_ms(Runtime& rt, GpuCase& g, const std::string& plan_id, int reps, Stream stream);

/// Relative L2 error of g.o against the fp32 GPU reference of the same request.
double check_against_reference(GpuCase& g, Stream stream);

}  // namespace tessera::tools
