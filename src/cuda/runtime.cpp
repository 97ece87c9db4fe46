// The GPU runtime: validate -> mu(M) -> select -> prepare -> launch (DESIGN.md section 6, online).
#include "tessera/runtime.hpp"

#include <cuda_runtime.h>

#include <chrono>
#include <functional>
#include <optional>

#include "core/catalog.hpp"
#include "core/plan_table.hpp"
#include "core/plan_table_file.hpp"
#include "core/request_plan.hpp"
#include "core/selector.hpp"
#include "cuda/check.cuh"
#include "cuda/launch_prep_gpu.hpp"
#include "cuda/mask_state_speculation.hpp"
#include "cuda/mask_state_workspace.hpp"
#include "kernels/launch.hpp"
#include "tessera/error.hpp"
#include "tessera/mask_state_gpu.hpp"

namespace tessera {

namespace {

using Clock = std::chrono::steady_clock;

double us_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

Arch device_arch(int major, int minor) {
  if (major == 8 && minor == 0) return Arch::kSm80;
  if (major == 8 && minor == 6) return Arch::kSm86;
  if (major == 8 && minor == 9) return Arch::kSm89;
  if (major == 9 && minor == 0) return Arch::kSm90a;
  if (major == 12 && minor == 0) return Arch::kSm120;
  throw Error(ErrorCode::kUnsupported, "device",
              "compute capability " + std::to_string(major) + "." + std::to_string(minor) +
                  " is not a Tessera target (8.0, 8.6, 8.9, 9.0, 12.0)");
}

kernels::KvVariant variant_of(const Plan& p) {
  if (p.packed_kv()) return kernels::KvVariant::kPacked;
  if (p.has_membership()) return kernels::KvVariant::kSpanMasked;
  return kernels::KvVariant::kSpan;
}

/// Everything that identifies an exact repeat besides the caller's mask_version.
struct RepeatKey {
  std::uint64_t mask_version = 0;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* mask_a = nullptr;
  const void* mask_b = nullptr;
  std::array<std::int64_t, 4> q_shape{}, k_shape{};
  int block_q = 0, block_kv = 0;
  std::string plan_request;  // the forced plan id, "" when selected
  bool operator==(const RepeatKey&) const = default;
};

/// What the runtime keeps per request (EligibilityRequest) it has seen: select_plan's answer for every regime, worked
/// out once, and the plans recent new-mask requests chose, from which the next preparation is speculated.
struct RequestMemo {
  RequestSelections selections;
  std::optional<Plan> last;  ///< plan of the last new-mask request
  int streak = 0;            ///< consecutive new-mask requests that chose `last`
  bool missed = false;       ///< the last speculation named another plan than the one selected
  std::string forced_id;     ///< the last forced plan id checked against this request; its plan, canonical id, regime
  Plan forced_plan;
  std::string forced_canonical_id, forced_regime;

  /// The plan to prepare before mu(M) is known: the last one, once chosen twice in a row after a miss.
  const Plan* speculation() const { return last && streak >= (missed ? 2 : 1) ? &*last : nullptr; }
  void record(const Plan& chosen, bool speculated) {
    if (speculated) missed = !(last && *last == chosen);
    if (last && *last == chosen) {
      ++streak;
    } else {
      last = chosen;
      streak = 1;
    }
  }
};

}  // namespace

struct Runtime::Impl {
  RuntimeOptions options;
  int device = 0;
  Arch arch = Arch::kSm90a;
  std::string arch_name_str;
  std::string table_status;
  std::optional<PlanTable> table;
  std::vector<CatalogEntry> entries;  // compiled in this build
  SelectorCache selector_cache;
  std::vector<RequestMemo> memos;  // per EligibilityRequest seen (cleared when it reaches kMaxMemos)
  static constexpr std::size_t kMaxMemos = 64;
  MaskStateWorkspace mask_ws;
  DeviceMaskState mask_state;
  DeviceTileMetadata metadata;
  DeviceBuffer workspace;  // split-KV partials
  Plan plan;
  std::optional<RepeatKey> last_key;
  DispatchInfo info;
  cudaEvent_t ev_start = nullptr, ev_stop = nullptr;

  ~Impl() {
    if (ev_start) cudaEventDestroy(ev_start);
    if (ev_stop) cudaEventDestroy(ev_stop);
  }

  RequestMemo& memo_for(const EligibilityRequest& er) {
    for (RequestMemo& mm : memos)
      if (mm.selections.request == er) return mm;
    if (memos.size() >= kMaxMemos) memos.clear();
    RequestMemo mm;
    mm.selections = select_for_every_regime(entries, table ? &*table : nullptr, er, &selector_cache);
    memos.push_back(std::move(mm));
    return memos.back();
  }

  EligibilityRequest eligibility_request(const AttentionRequest& r, const ProblemShape& s) const {
    return tessera::eligibility_request(arch, r, s, r.q.dtype, options.max_workspace_bytes);
  }

  kernels::AttentionParams params(const AttentionRequest& r, const ProblemShape& s) {
    kernels::AttentionParams p;
    p.dtype = r.q.dtype;
    p.q = r.q.data;
    p.k = r.k.data;
    p.v = r.v.data;
    p.o = r.o.data;
    p.lse = r.lse.empty() ? nullptr : static_cast<float*>(r.lse.data);
    p.q_stride_b = r.q.stride[0], p.q_stride_n = r.q.stride[1], p.q_stride_h = r.q.stride[2];
    p.k_stride_b = r.k.stride[0], p.k_stride_n = r.k.stride[1], p.k_stride_h = r.k.stride[2];
    p.v_stride_b = r.v.stride[0], p.v_stride_n = r.v.stride[1], p.v_stride_h = r.v.stride[2];
    p.o_stride_b = r.o.stride[0], p.o_stride_n = r.o.stride[1], p.o_stride_h = r.o.stride[2];
    if (!r.lse.empty()) p.lse_stride_b = r.lse.stride[0], p.lse_stride_h = r.lse.stride[1];
    p.batch = static_cast<std::int32_t>(s.batch);
    p.n_q = static_cast<std::int32_t>(s.n_q);
    p.n_kv = static_cast<std::int32_t>(s.n_kv);
    p.h_q = static_cast<std::int32_t>(s.heads_q);
    p.h_kv = static_cast<std::int32_t>(s.heads_kv);
    p.head_dim = static_cast<std::int32_t>(s.head_dim);
    p.block_q = r.geometry.block_q;
    p.block_kv = r.geometry.block_kv;
    p.scale = static_cast<float>(r.effective_scale());  // the kernels compute in float32
    p.meta = metadata.view();
    const std::int64_t tq = plan.tile_q();
    const std::int64_t parts = metadata.n_partials;
    if (parts > 0) {
      const std::size_t o_bytes = static_cast<std::size_t>(parts * tq * s.head_dim) * sizeof(float);
      const std::size_t l_bytes = static_cast<std::size_t>(parts * tq) * sizeof(float);
      workspace.reserve(o_bytes + l_bytes);
      p.o_partial = workspace.as<float>();
      p.lse_partial = reinterpret_cast<float*>(static_cast<char*>(workspace.data()) + o_bytes);
    }
    return p;
  }
};

Runtime::Runtime(const RuntimeOptions& options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.options = options;
  if (cuda_device_count() == 0) throw Error(ErrorCode::kUnsupported, "device", "no CUDA device is visible");
  TESSERA_CUDA_CHECK(cudaGetDevice(&m.device));
  int major = 0, minor = 0;
  TESSERA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, m.device));
  TESSERA_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, m.device));
  m.arch = device_arch(major, minor);
  m.arch_name_str = std::string(arch_name(m.arch));
  for (const auto& ce : kernels::compiled_entries()) {
    if (const CatalogEntry* e = find_catalog_entry(ce.name)) m.entries.push_back(*e);
  }
  TESSERA_CUDA_CHECK(cudaEventCreate(&m.ev_start));
  TESSERA_CUDA_CHECK(cudaEventCreate(&m.ev_stop));

  if (!options.use_plan_table) {
    m.table_status = "plan tables disabled: documented default plans";
    return;
  }
  if (!options.plan_table_path.empty()) {  // a user table: checked strictly, never a silent fallback
    PlanTableFileInfo file;
    m.table = read_plan_table_file(options.plan_table_path, m.arch_name_str, &file);
    warm_selector_cache(*m.table, m.selector_cache);  // no request parses a plan id
    m.table_status = file.status;
    return;
  }
  EmbeddedTableLoad embedded = load_embedded_plan_table(m.arch_name_str);
  m.table = std::move(embedded.table);
  m.table_status = std::move(embedded.status);
  if (m.table) warm_selector_cache(*m.table, m.selector_cache);  // no request parses a plan id
}

Runtime::~Runtime() = default;
Runtime::Runtime(Runtime&&) noexcept = default;
Runtime& Runtime::operator=(Runtime&&) noexcept = default;

void Runtime::run(const AttentionRequest& request, Stream stream, const RunOptions& options) {
  Impl& m = *impl_;
  const auto t0 = Clock::now();
  double waited_us = 0;
  const ProblemShape shape = validate_request(request);
  if (request.q.device != Device::kCuda)
    throw Error(ErrorCode::kInvalidArgument, "q", "Runtime::run needs tensors in GPU memory (use run_cpu for CPU tensors)");
  if (!request.lse.empty() && request.lse.stride[2] != 1)
    throw Error(ErrorCode::kInvalidArgument, "lse.stride", "the token dimension of lse must be contiguous (stride 1)");
  const EligibilityRequest er = m.eligibility_request(request, shape);

  RepeatKey key;
  key.mask_version = options.mask_version;
  key.q = request.q.data;
  key.k = request.k.data;
  const BlockMask& mk = request.mask;
  key.mask_a = mk.format == MaskFormat::kDense ? mk.dense.data
               : mk.format == MaskFormat::kBlockCsr ? mk.row_offsets.data : mk.counts.data;
  key.mask_b = mk.format == MaskFormat::kBlockCsr ? mk.col_indices.data
               : mk.format == MaskFormat::kIndexLists ? mk.indices.data : nullptr;
  std::copy(request.q.shape.begin(), request.q.shape.end(), key.q_shape.begin());
  std::copy(request.k.shape.begin(), request.k.shape.end(), key.k_shape.begin());
  key.block_q = request.geometry.block_q;
  key.block_kv = request.geometry.block_kv;
  key.plan_request = options.plan_id;
  const bool repeat = options.mask_version != 0 && m.last_key && *m.last_key == key;

  DispatchInfo info;
  if (repeat) {
    info = m.info;
    info.cache_hit = true;
    info.prepare_speculated = info.prepare_speculation_hit = false;
    info.host_mask_state_us = 0;
    info.host_select_us = 0;
    info.host_prepare_us = 0;
  } else {
    m.last_key.reset();
    // Everything selection needs but mu(M)'s statistics is worked out before the wait: the forced plan, or the
    // request's answers for every regime (RequestMemo). After the wait the host runs with cold caches (bench/NOTES.md,
    // "Host dispatch, session 9"), so it only walks the tree there.
    const auto ts0 = Clock::now();
    const bool forced = !options.plan_id.empty();
    RequestMemo* memo = &m.memo_for(er);
    if (forced && memo->forced_id != options.plan_id) {  // checked once per (request, id)
      auto parsed = m.selector_cache.parsed.find(options.plan_id);  // memoized parse of the forced id
      if (parsed == m.selector_cache.parsed.end() || !parsed->second)
        parsed = m.selector_cache.parsed.insert_or_assign(options.plan_id, parse_plan_id(options.plan_id)).first;
      memo->forced_plan = checked_forced_plan(*parsed->second, options.plan_id, m.entries, er);
      memo->forced_canonical_id = plan_id(memo->forced_plan);
      memo->forced_regime = request_key(er).str() + "/forced";
      memo->forced_id = options.plan_id;
    }
    const Plan* forced_plan = forced ? &memo->forced_plan : nullptr;
    double select_us = us_between(ts0, Clock::now());

    // Speculative preparation: the plan a forced id names, or the one this request's recent new-mask calls chose,
    // prepared from the mask-state hook before the host waits for mu(M)'s counters (gated on the device, so a mask
    // that turns out invalid or larger than the buffers writes nothing). Plans whose preparation launches nothing,
    // and persistent plans (ungated sort), are not speculated.
    const Plan* spec = nullptr;
    if (m.options.speculative_prepare) spec = forced ? forced_plan : memo->speculation();
    if (spec && (spec->org.persistent || !prepare_plan_gpu_launches(*spec, /*implicit_items=*/true))) spec = nullptr;
    const PrepProblem problem = prep_problem(shape);
    bool speculated = false, spec_enqueued = false;
    std::int64_t spec_capacity = 0;
    double spec_us = 0;
    std::function<void(const MaskStateGate&)> hook;
    if (spec) {
      hook = [&](const MaskStateGate& gate) {
        const auto t = Clock::now();
        speculated = true;
        try {
          enqueue_prepare_plan_gpu(*spec, m.mask_state, problem, stream, m.metadata, /*implicit_items=*/true, &gate);
          spec_enqueued = true;
          spec_capacity = gate.capacity;
        } catch (const Error&) {
          // not kept: the preparation after the wait raises whatever is wrong with this plan (a failed allocation's
          // error is cleared here, so that it is not reported by a later launch check)
          (void)cudaGetLastError();
        }
        spec_us = us_between(t, Clock::now());
      };
    }
    // The coarsened pair counts delay the host's read of the counters (they need pass 2's sorted rows): counted only
    // where the request's tree reads them.
    m.mask_ws.impl().count_coarsened = !forced && memo->selections.reads_coarsen_cost;
    const auto tm = Clock::now();
    build_mask_state_gpu(request.mask, stream, m.mask_ws, m.mask_state, hook);
    const double wait_us = last_wait_us(m.mask_ws);  // mu(M)'s one synchronization
    waited_us += wait_us;
    info.host_mask_state_us = us_between(tm, Clock::now()) - wait_us - spec_us;
    info.stats = m.mask_state.stats;

    const auto ts = Clock::now();
    if (forced) {
      m.plan = *forced_plan;
      info.plan_id = memo->forced_canonical_id;
      info.source = "forced";
      info.regime = memo->forced_regime;
    } else {
      const Selection& s = memo->selections.select(make_features(shape.batch, shape.heads_q, shape.n_q, info.stats));
      m.plan = s.plan;
      info.plan_id = s.plan_id;
      info.source = selection_source_name(s.source);
      info.regime = s.regime;
      info.ranks_skipped = s.ranks_skipped;
    }
    info.host_select_us = select_us + us_between(ts, Clock::now());

    const bool hit = spec_enqueued && m.plan == *spec && m.mask_state.nnz <= spec_capacity;
    if (!forced) memo->record(m.plan, spec_enqueued);
    info.prepare_speculated = spec_enqueued;
    info.prepare_speculation_hit = hit;
    if (speculated && !hit) {  // the real preparation may regrow buffers the queued speculative kernels hold
      const auto tw = Clock::now();
      TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream));
      waited_us += us_between(tw, Clock::now());
    }
    const auto tp = Clock::now();
    if (hit)
      settle_speculative_prepare(m.metadata, m.mask_state);
    else
      enqueue_prepare_plan_gpu(m.plan, m.mask_state, problem, stream, m.metadata, /*implicit_items=*/true);
    const auto tf = Clock::now();
    info.host_prepare_us = spec_us + us_between(tp, tf);
    finish_prepare_plan_gpu(m.metadata, stream);  // totals back: one synchronization (none for zero copy + implicit)
    waited_us += us_between(tf, Clock::now());
  }

  const auto tl = Clock::now();
  kernels::AttentionParams p = m.params(request, shape);
  const std::string kernel = plan_kernel_name(m.plan);
  if (options.time_kernel) TESSERA_CUDA_CHECK(cudaEventRecord(m.ev_start, stream));
  kernels::launch_attention(kernel, variant_of(m.plan), p, stream);
  if (m.metadata.n_merge > 0) kernels::launch_merge(p, m.plan.tile_q(), stream);
  if (options.time_kernel) TESSERA_CUDA_CHECK(cudaEventRecord(m.ev_stop, stream));
  const auto t_enqueued = Clock::now();
  info.host_launch_us = us_between(tl, t_enqueued);
  info.total_ms = us_between(t0, t_enqueued) / 1000.0;
  info.host_dispatch_us = us_between(t0, t_enqueued) - waited_us;
  info.kernel_ms = -1;
  if (options.time_kernel) {
    TESSERA_CUDA_CHECK(cudaEventSynchronize(m.ev_stop));
    float ms = 0;
    TESSERA_CUDA_CHECK(cudaEventElapsedTime(&ms, m.ev_start, m.ev_stop));
    info.kernel_ms = ms;
  }
  info.table_status = m.table_status;
  m.info = info;
  if (options.mask_version != 0) m.last_key = key;
}

std::vector<std::string> Runtime::eligible_plans(const AttentionRequest& request) const {
  const ProblemShape shape = validate_request(request, {.allow_reference_dtypes = false, .check_host_mask_contents = false});
  CandidateOptions o;
  o.splits = {1, 2, 4, 8};
  o.traversals = {Traversal::kAscending, Traversal::kRunMajor};
  o.include_persistent = true;
  std::vector<std::string> ids;
  for (const Plan& p : enumerate_plans(impl_->entries, impl_->eligibility_request(request, shape), o))
    ids.push_back(plan_id(p));
  return ids;
}

std::string Runtime::direct_plan(const AttentionRequest& request) const {
  const ProblemShape shape = validate_request(request, {.allow_reference_dtypes = false, .check_host_mask_contents = false});
  const auto p = tessera::direct_plan(impl_->entries, impl_->eligibility_request(request, shape));
  return p ? plan_id(*p) : std::string();
}

const DispatchInfo& Runtime::last_dispatch() const noexcept { return impl_->info; }
const std::string& Runtime::arch() const noexcept { return impl_->arch_name_str; }
const std::string& Runtime::table_status() const noexcept { return impl_->table_status; }

}  // namespace tessera
