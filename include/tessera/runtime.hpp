#pragma once
/// @file runtime.hpp
/// The Tessera runtime (DESIGN.md section 6, online): for each request it builds the mask state mu(M) on the GPU,
/// finds the performance regime in the plan table, takes the first eligible plan of its ranking (the key's base
/// plan on a miss, the documented default plan for keys never profiled), prepares only that plan's launch
/// metadata and launches the kernel(s). The plan/run split of FlashInfer, with the plan chosen per request.
///
/// Quick start:
///   tessera::Runtime rt;                       // loads the plan table embedded for this GPU
///   tessera::AttentionRequest req{q, k, v, o}; // tensors on the GPU, see request.hpp
///   req.geometry = {64, 64};
///   req.mask = tessera::BlockMask::from_index_lists(counts, indices, n_kvb);
///   rt.run(req, stream);                       // O (and LSE, when given) written on `stream`
///   rt.last_dispatch().plan_id;                // what ran, and why
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/cuda_types.hpp"
#include "tessera/mask_state.hpp"
#include "tessera/request.hpp"

namespace tessera {

/// Options of a Runtime.
struct RuntimeOptions {
  /// Path of a user plan-table artifact (JSON, docs/selection.md) to use instead of the one embedded for this GPU;
  /// "" = the embedded table. Checked as strictly as the embedded table (check_plan_table_file, plan_table_file.hpp),
  /// and a table that fails (corrupt, another catalog_version or format_version, another arch than this GPU's) is an
  /// error naming the file, never a silent fallback. Keys the table has no tree for get the documented default plan.
  std::string plan_table_path;
  /// false: ignore plan tables and always use the documented default plan (for comparisons and debugging).
  bool use_plan_table = true;
  /// Largest split-KV workspace a plan may need, in bytes; -1 = unlimited. Plans over it are not eligible.
  std::int64_t max_workspace_bytes = -1;
  /// Speculative launch preparation (DESIGN.md section 6): on a new mask, prepare the plan this request's recent
  /// new-mask calls chose (or the forced plan) before waiting for mu(M)'s statistics (not persistent plans, nor
  /// plans whose preparation launches nothing), gated on the device so a mask
  /// that turns out invalid or larger than the buffers writes nothing; after the wait it is kept when selection
  /// names the same plan, else the stream is synchronized and the selected plan prepared. Results are the same
  /// either way (only host time and, on a miss, one wasted preparation differ). false: prepare after selection only.
  bool speculative_prepare = true;
};

/// Options of one Runtime::run().
struct RunOptions {
  /// Exact-repeat cache. When non-zero and equal to the previous call's value, with the same tensors, shapes and
  /// mask arrays, the caller promises the mask *contents* are unchanged: mu(M) and the plan's launch metadata
  /// are reused and only the kernel is launched. 0 (default) always rebuilds.
  std::uint64_t mask_version = 0;
  /// Run this plan id instead of selecting one (profiling, comparisons). It must be eligible, else
  /// Error(kInvalidArgument, "plan_id") says why.
  std::string plan_id;
  /// Record CUDA events around the kernel launches and report DispatchInfo::kernel_ms (synchronizes the stream).
  bool time_kernel = false;
};

/// What the last run() did.
struct DispatchInfo {
  std::string plan_id;          ///< canonical plan id that ran
  std::string regime;           ///< "<key>/leaf<N>", "<key>/default" or "<key>/forced"
  std::string source;           ///< "table", "base", "default" or "forced"
  /// Which plan table selection used: "embedded table for sm90a (<catalog version>, <N> keys)", "table from <path>
  /// (...)" (a user table), or why none is used (Runtime::table_status(); run_cpu the same for its table).
  std::string table_status;
  int ranks_skipped = 0;        ///< ranked plans found ineligible before the chosen one
  bool cache_hit = false;       ///< exact repeat: mu(M) and preparation were skipped
  /// A preparation was enqueued before mu(M)'s statistics were read (RuntimeOptions::speculative_prepare; false on a
  /// repeat, for persistent plans and for plans whose preparation launches nothing).
  bool prepare_speculated = false;
  bool prepare_speculation_hit = false;  ///< ... and was kept (selection named its plan and the mask fit)
  MaskStats stats;              ///< s(M) of the request's mask
  /// Host time of mu(M)'s build (microseconds): validation and launches of its passes, its wait for the GPU excluded,
  /// a speculative preparation enqueued meanwhile excluded (counted in host_prepare_us). 0 on a repeat.
  double host_mask_state_us = 0;
  double host_select_us = 0;    ///< host time of lookup + eligibility (microseconds), before and after mu(M)
  /// Host time of the whole call (microseconds) excluding its waits for the GPU (mu(M)'s counters, the preparation's
  /// totals, a discarded speculation): validation, mu(M)'s launches, selection, preparation, kernel launches.
  double host_dispatch_us = 0;
  /// Host time of enqueuing launch preparation (microseconds; 0 on a repeat): a speculative one plus, unless it was
  /// kept, the selected plan's.
  double host_prepare_us = 0;
  double host_launch_us = 0;    ///< host time of enqueuing the attention (+ merge) kernels (microseconds)
  double total_ms = 0;          ///< wall time of the call until the work was enqueued, GPU waits included (ms)
  double kernel_ms = -1;        ///< attention (+ merge) kernel time, when RunOptions::time_kernel (ms)
};

/// The runtime. One per device and thread; not thread-safe. Buffers grow to the largest request and are reused (launch
/// metadata is sized for the largest mask seen; plans with persistent CTAs share one ticket counter), so calls on
/// different streams must be ordered by the caller: a call may reuse buffers that the previous call's work on another
/// stream still reads or writes.
class Runtime {
 public:
  /// Binds to the current CUDA device and loads its plan table (embedded, or RuntimeOptions::plan_table_path).
  /// An embedded table that is corrupt or version-mismatched, or no table embedded for this GPU, is not an error: the
  /// runtime then uses the documented default plans and table_status() says why (e.g. "embedded table for sm90a
  /// rejected, documented default plans used: ..."). Throws Error(kUnsupported) when no CUDA device is visible or its
  /// architecture is not one Tessera builds for; for a user table (plan_table_path) Error(kIoError,
  /// "plan_table_path") when it cannot be read as a file (missing, unreadable, or a directory) and
  /// Error(kFormatError, "plan_table_path") naming the file and the reason when it is corrupt, of another
  /// catalog_version or format_version, or profiled for another arch ("table for sm80, this GPU is sm90a").
  explicit Runtime(const RuntimeOptions& options = {});
  ~Runtime();
  Runtime(Runtime&&) noexcept;
  Runtime& operator=(Runtime&&) noexcept;

  /// Computes E(M) for `request` (tensors on this GPU) on `stream`: validate, mu(M), select, prepare, launch.
  /// Errors (before anything is written to O): Error(kInvalidArgument | kUnsupported) naming the argument.
  /// Synchronizes `stream` to read the mask statistics (and once more inside preparation) unless the call is an
  /// exact repeat (RunOptions::mask_version).
  void run(const AttentionRequest& request, Stream stream, const RunOptions& options = {});

  /// Ids of every plan eligible for `request` in this build (profiling). Split-KV partitions 1, 2, 4 and 8,
  /// ascending and run-major traversal; one CTA per work item (`g1`), and persistent CTAs (`g1p`, right after the same
  /// `g1` plan) on the kernels that run them (the wgmma 64- and 128-row tiles but t64x128).
  std::vector<std::string> eligible_plans(const AttentionRequest& request) const;
  /// Id of the Direct plan (T = B, split 1) for `request`, or "" when no kernel tile equals the logical block.
  std::string direct_plan(const AttentionRequest& request) const;

  /// Details of the last run().
  const DispatchInfo& last_dispatch() const noexcept;
  /// The architecture this runtime runs on, e.g. "sm90a".
  const std::string& arch() const noexcept;
  /// "embedded table for sm90a (cat-...)", "table from <path>", or why none is used.
  const std::string& table_status() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
