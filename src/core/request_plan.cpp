#include "core/request_plan.hpp"

#include "core/catalog.hpp"
#include "tessera/error.hpp"

namespace tessera {

PrepProblem prep_problem(const ProblemShape& s) noexcept {
  PrepProblem p;
  p.batch = s.batch;
  p.heads_q = s.heads_q;
  p.heads_kv = s.heads_kv;
  p.n_q = s.n_q;
  p.n_kv = s.n_kv;
  p.head_dim = s.head_dim;
  return p;
}

EligibilityRequest eligibility_request(Arch arch, const AttentionRequest& request, const ProblemShape& shape,
                                       DType kernel_dtype, std::int64_t max_workspace_bytes) {
  EligibilityRequest er;
  er.arch = arch;
  er.dtype = kernel_dtype;
  er.head_dim = static_cast<int>(shape.head_dim);
  er.block_q = request.geometry.block_q;
  er.block_kv = request.geometry.block_kv;
  er.mask_format = request.mask.format;
  er.max_workspace_bytes = max_workspace_bytes;
  return er;
}

Plan checked_forced_plan(const std::string& id, std::span<const CatalogEntry> entries, const EligibilityRequest& request) {
  return checked_forced_plan(parse_plan_id(id), id, entries, request);
}

Plan checked_forced_plan(const Plan& p, const std::string& id, std::span<const CatalogEntry> entries,
                         const EligibilityRequest& request) {
  const CatalogEntry* e = find_plan_entry(p, entries);
  if (!e) throw Error(ErrorCode::kInvalidArgument, "plan_id", "no kernel of the catalog in use runs '" + id + "'");
  const Eligibility el = eligible(p, *e, request);
  if (!el) throw Error(ErrorCode::kInvalidArgument, "plan_id", "'" + id + "' is not eligible: " + el.reason);
  return p;
}

}  // namespace tessera
