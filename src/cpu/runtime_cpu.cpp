// The CPU execution path: selection as on the GPU, CPU launch preparation, float64 plan executor.
#include "tessera/runtime_cpu.hpp"

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

#include "core/catalog.hpp"
#include "core/launch_prep.hpp"
#include "core/plan_table.hpp"
#include "core/plan_table_file.hpp"
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

/// A plan table as selection uses it, with the status string run_cpu reports (table null: default plans).
struct LoadedTable {
  std::shared_ptr<const PlanTable> table;
  std::string status;
};

/// The embedded plan table of `arch`, parsed once per process (null: none embedded, or rejected: the documented
/// fallback to default plans). Thread-safe.
LoadedTable embedded_table(const std::string& arch) {
  static std::mutex mu;
  static std::map<std::string, LoadedTable> tables;
  const std::lock_guard<std::mutex> lock(mu);
  auto it = tables.find(arch);
  if (it == tables.end()) {
    EmbeddedTableLoad e = load_embedded_plan_table(arch);
    LoadedTable t;
    if (e.table) t.table = std::make_shared<PlanTable>(std::move(*e.table));
    t.status = std::move(e.status);
    it = tables.emplace(arch, std::move(t)).first;
  }
  return it->second;
}

/// The user table at `path` for `arch` (read_plan_table_file: errors name the file), parsed again only when the
/// file's size or modification time changed since it was last read. Thread-safe.
LoadedTable user_table(const std::string& path, const std::string& arch) {
  struct Cached {
    std::filesystem::file_time_type mtime;
    std::uintmax_t size = 0;
    LoadedTable loaded;
  };
  static std::mutex mu;
  static std::map<std::pair<std::string, std::string>, Cached> tables;
  std::error_code ec1, ec2;
  const auto mtime = std::filesystem::last_write_time(path, ec1);
  const auto size = std::filesystem::file_size(path, ec2);
  const std::lock_guard<std::mutex> lock(mu);
  const auto k = std::make_pair(path, arch);
  if (auto it = tables.find(k); it != tables.end() && !ec1 && !ec2 && it->second.mtime == mtime && it->second.size == size)
    return it->second.loaded;
  PlanTableFileInfo info;
  Cached c;
  c.loaded.table = std::make_shared<PlanTable>(read_plan_table_file(path, arch, &info));  // throws naming the file
  c.loaded.status = info.status;
  c.mtime = mtime;
  c.size = size;
  tables[k] = c;
  return c.loaded;
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
    LoadedTable loaded;
    if (!options.use_plan_table) loaded.status = "plan tables disabled: documented default plans";
    else if (!options.plan_table_path.empty()) loaded = user_table(options.plan_table_path, options.arch);
    else loaded = embedded_table(options.arch);
    const PlanTable* table_ptr = loaded.table.get();
    info.table_status = loaded.status;
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
