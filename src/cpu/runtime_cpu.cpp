// The CPU execution path: selection as on the GPU, CPU launch preparation, float64 plan executor.
#include "tessera/runtime_cpu.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <mutex>

#include "core/catalog.hpp"
#include "core/embedded_tables.hpp"
#include "core/launch_prep.hpp"
#include "core/plan_table.hpp"
#include "core/request_plan.hpp"
#include "core/selector.hpp"
#include "cpu/plan_executor.hpp"
#include "tessera/error.hpp"
#include "tessera/mask_state.hpp"

namespace tessera {

namespace {

Arch parse_arch(const std::string& name) {
  if (const std::optional<Arch> a = arch_from_name(name)) return *a;
  throw Error(ErrorCode::kInvalidArgument, "arch", "unknown architecture '" + name + "' (expected sm80, sm86, sm89, sm90a or sm120)");
}

/// The embedded plan table of `arch`, parsed once per process (null: none embedded, or rejected: the documented
/// fallback to default plans). Thread-safe.
const PlanTable* embedded_table(const std::string& arch) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<PlanTable>> tables;  // null entry: none usable
  const std::lock_guard<std::mutex> lock(mu);
  auto it = tables.find(arch);
  if (it == tables.end()) {
    std::unique_ptr<PlanTable> t;
    const std::string_view js = embedded_plan_table(arch);
    if (!js.empty()) {
      try {
        t = std::make_unique<PlanTable>(plan_table_for_arch(std::string(js), arch, std::string(catalog_version())));
      } catch (const Error&) {
        // documented fallback: default plans
      }
    }
    it = tables.emplace(arch, std::move(t)).first;
  }
  return it->second.get();
}

double us_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

DispatchInfo run_cpu(const AttentionRequest& request, const CpuRunOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  ValidateOptions vo;
  vo.allow_reference_dtypes = true;
  const ProblemShape shape = validate_request(request, vo);
  if (request.q.device != Device::kCpu || request.mask.rows() < 0)
    throw Error(ErrorCode::kInvalidArgument, "q", "run_cpu needs tensors in CPU memory");
  const auto tm = std::chrono::steady_clock::now();
  const HostMaskState mask = build_mask_state_cpu(request.mask);
  const double mask_us = us_since(tm);

  // The kernel dtype to mimic: f16 inputs select f16 kernels, everything else bf16 kernels.
  const DType kernel_dtype = request.q.dtype == DType::kFloat16 ? DType::kFloat16 : DType::kBFloat16;
  const EligibilityRequest er = eligibility_request(parse_arch(options.arch), request, shape, kernel_dtype);

  DispatchInfo info;
  info.stats = mask.stats;
  info.host_mask_state_us = mask_us;
  const auto ts = std::chrono::steady_clock::now();
  Plan plan;
  if (!options.plan_id.empty()) {
    plan = checked_forced_plan(options.plan_id, catalog(), er);
    info.plan_id = plan_id(plan);
    info.source = "forced";
    info.regime = request_key(er).str() + "/forced";
  } else {
    const PlanTable* table_ptr = options.use_plan_table ? embedded_table(options.arch) : nullptr;
    const FeatureVector f = make_features(shape.batch, shape.heads_q, shape.n_q, mask.stats);
    const Selection s = select_plan(catalog(), table_ptr, er, f);
    plan = s.plan;
    info.plan_id = s.plan_id;
    info.source = selection_source_name(s.source);
    info.regime = s.regime;
    info.ranks_skipped = s.ranks_skipped;
  }
  info.host_select_us = us_since(ts);

  const auto tp = std::chrono::steady_clock::now();
  const HostTileMetadata md = prepare_plan_cpu(plan, mask, prep_problem(shape));
  info.host_prepare_us = us_since(tp);
  const auto tl = std::chrono::steady_clock::now();
  execute_plan_cpu(md, request.q, request.k, request.v, request.o, request.lse, request.effective_scale());
  info.host_launch_us = us_since(tl);
  info.host_dispatch_us = us_since(t0);
  info.total_ms = info.host_dispatch_us / 1000.0;
  return info;
}

}  // namespace tessera
