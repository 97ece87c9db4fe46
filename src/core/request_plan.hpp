#pragma once
// Glue shared by the GPU runtime and the CPU path: from a validated request to the inputs of eligibility and
// launch preparation, and the checks of a plan id forced by the caller.
#include <span>
#include <string>

#include "core/eligibility.hpp"
#include "core/launch_prep.hpp"
#include "tessera/request.hpp"

namespace tessera {

/// The problem sizes launch preparation needs, from a validated request's shape.
PrepProblem prep_problem(const ProblemShape& shape) noexcept;

/// The request features eligibility looks at. `kernel_dtype` is the dtype of the kernel to use (the request's
/// q dtype on the GPU; the CPU path mimics bf16 kernels for f32/f64 inputs).
EligibilityRequest eligibility_request(Arch arch, const AttentionRequest& request, const ProblemShape& shape,
                                       DType kernel_dtype, std::int64_t max_workspace_bytes = -1);

/// Parses a caller-forced plan id and checks it against `entries` and `request`. Throws
/// Error(kInvalidArgument, "plan_id") saying why it cannot run (unparsable, no such kernel, not eligible).
Plan checked_forced_plan(const std::string& id, std::span<const CatalogEntry> entries, const EligibilityRequest& request);

/// As above for a plan already parsed from `id` (the Runtime memoizes the parse): checks it against `entries` and
/// `request`. Throws Error(kInvalidArgument, "plan_id") naming `id` when no kernel runs it or it is not eligible.
Plan checked_forced_plan(const Plan& parsed, const std::string& id, std::span<const CatalogEntry> entries,
                         const EligibilityRequest& request);

}  // namespace tessera
