#pragma once
/// @file runtime_cpu.hpp
/// The execution path where no GPU exists (DESIGN.md section 5): the same selection as the GPU runtime, the CPU
/// twins of launch preparation, and the float64 CPU plan executor. Slow (float64, one core per call); exact.
#include <string>

#include "tessera/request.hpp"
#include "tessera/runtime.hpp"

namespace tessera {

/// Options of run_cpu().
struct CpuRunOptions {
  /// Architecture whose plan table and catalog drive the selection ("sm90a" = H100/H200).
  std::string arch = "sm90a";
  /// Run this plan id instead of selecting one ("" = select). Must be eligible, else Error(kInvalidArgument, "plan_id").
  std::string plan_id;
  /// Use the embedded plan table of `arch` when there is one (else the documented default plan).
  bool use_plan_table = true;
  /// A user plan table (plan_table_file.hpp) instead of the embedded one; "" = embedded. It must have been profiled
  /// for `arch`; it is read once and again whenever the file's size or modification time changes. Checked as
  /// strictly as the embedded table: errors Error(kIoError | kFormatError, "plan_table_path") name the file, never
  /// a fallback. Ignored when use_plan_table is false or plan_id is given.
  std::string plan_table_path;
};

/// Computes E(M) for `request` whose tensors (and mask) are in CPU memory; q/k/v any of f16, bf16, f32, f64;
/// o any floating dtype (rounded once from float64); lse optional (f32 or f64). Validates first
/// (validate_request with reference dtypes allowed): errors name the argument and nothing is written.
/// Returns what ran (plan id, regime, source, table_status, mask statistics) and host times in microseconds, everything on the
/// calling thread: host_mask_state_us = mu(M) (build_mask_state_cpu), host_select_us = lookup + eligibility (the
/// embedded table is parsed once per process), host_prepare_us = CPU launch preparation, host_launch_us = the float64
/// execution, host_dispatch_us = the whole call (total_ms the same in ms); kernel_ms = -1; never speculative.
DispatchInfo run_cpu(const AttentionRequest& request, const CpuRunOptions& options = {});

}  // namespace tessera
