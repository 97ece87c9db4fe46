// `tessera run`: the main job. Runs corpus cases through the runtime, spot-checks outputs against the GPU
// reference and prints per family: cases, density, plans chosen, kernel time, complete-request time (new mask,
// its ratio to Direct's, and exact repeat), host dispatch percentiles, effective TFLOP/s, regret against the fastest measured candidate, speedup over Direct; writes
// JSON. With no GPU it runs the float64 CPU plan executor on a scaled-down default and says so.
#include <cuda_runtime.h>
#include <fmt/core.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <utility>
#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "families_option.hpp"
#include "seed_option.hpp"
#include "write_file.hpp"
#include "cuda/check.cuh"
#include "gpu_case.hpp"
#include "run_cpu_default.hpp"
#include "tessera/cuda_types.hpp"
#include "tessera/error.hpp"
#include "tessera/plan_table_file.hpp"
#include "tessera/runtime.hpp"
#include "tessera/version.hpp"
#include "tessera_corpus/case_choice.hpp"
#include "tessera_corpus/family.hpp"
#include "tessera_corpus/sta.hpp"

namespace tessera::tools {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct RunArgs {
  std::vector<std::string> families;
  int cases_per_family = 2;
  std::string json_path = "tessera_run.json";
  bool regret = true;
  bool check = true;
  bool cpu = false;
  std::uint64_t seed = 1;
  double max_error = 1e-2;
  std::string plan_table;  ///< --plan-table: a user plan table instead of the embedded one ("" = embedded)
};

/// Runs `f`, naming --plan-table in the errors that name the runtime's "plan_table_path".
template <class F>
auto with_plan_table_option(F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    if (e.argument() != "plan_table_path") throw;
    throw Error(e.code(), "--plan-table", e.message());
  }
}

/// The embedded default: `n` evaluation-split cases of every family (STA-real included), spread over the family's
/// sources and requests (corpus::spread_cases).
std::vector<corpus::Case> default_cases(const RunArgs& a) {
  corpus::CorpusOptions opt;
  opt.families = a.families;
  std::vector<corpus::Case> out;
  for (const std::string& fam : corpus::selected_families(opt))
    for (const int i : corpus::spread_cases(fam, "evaluation", a.cases_per_family, opt))
      out.push_back(corpus::make_case(fam, i, opt));
  return out;
}

/// Reads what the cases need before anything runs (corpus::check_inputs: the families and, with STA-real, the
/// real STA table), so a missing or bad table fails at once, not after every other family, with an error naming it.
void check_sta_table_first(const corpus::CorpusOptions& opt) {
  const auto fams = corpus::selected_families(opt);
  if (std::find(fams.begin(), fams.end(), "STA-real") == fams.end()) return;
  const std::string path = corpus::default_sta_table_path();
  const char* from = std::getenv("TESSERA_STA_TABLE") ? " (from TESSERA_STA_TABLE)" : "";
  try {
    corpus::check_inputs(opt);
  } catch (const Error& e) {
    throw Error(e.code(), "sta_table", fmt::format("'{}'{}: {}", path, from, e.message()));
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kIoError, "sta_table", fmt::format("cannot read '{}'{}: {}", path, from, e.what()));
  }
}

/// Throws Error(kInvalidArgument, "--json") when the report would be written over the real STA table that STA-real
/// cases are read from (default path or $TESSERA_STA_TABLE), whichever families run.
void check_json_not_sta_table(const corpus::CorpusOptions& opt, const std::string& json_path) {
  const std::string table = opt.sta_table.empty() ? corpus::default_sta_table_path() : opt.sta_table;
  if (!table.empty()) check_not_input(json_path, table, "--json", "real STA table");
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

double geomean(const std::vector<double>& v) {
  if (v.empty()) return NAN;
  double s = 0;
  for (double x : v) s += std::log(x);
  return std::exp(s / static_cast<double>(v.size()));
}

/// The element at rank floor(p * n) of the sorted values (p = 0.5: the median, upper one for even n); NaN if none.
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

constexpr int kRepeats = 7;

/// Wall time (ms) of one complete request `rt.run(request, o)`, from an idle stream to its completion.
double request_ms(Runtime& rt, const AttentionRequest& request, const RunOptions& o, Stream stream) {
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream));
  const auto t0 = Clock::now();
  rt.run(request, stream, o);
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream));
  return ms_since(t0);
}

/// Median wall time (ms) of kRepeats complete requests (request_ms).
double median_request_ms(Runtime& rt, const AttentionRequest& request, const RunOptions& o, Stream stream) {
  std::vector<double> ms;
  for (int r = 0; r < kRepeats; ++r) ms.push_back(request_ms(rt, request, o, stream));
  return percentile(ms, 0.5);
}

/// Cold (new mask: mu(M), selection, preparation, kernel) and warm (exact repeat, mask_version `version`: the kernel
/// alone) complete requests, median wall times (ms) of kRepeats each, measured in interleaved rounds: cold, then an
/// untimed call that sets up the exact repeat, then warm. Timing all cold requests first and all warm ones after put
/// the clock and temperature drift of a long kernel into the difference (STA-real, 80 ms per request: warm 1.8 %
/// slower than cold in session 8's calls 2 and 4). Appends each cold call's DispatchInfo to `cold_infos`.
std::pair<double, double> cold_and_warm_request_ms(Runtime& rt, const AttentionRequest& request,
                                                   std::uint64_t version, Stream stream,
                                                   std::vector<DispatchInfo>& cold_infos) {
  RunOptions warm;
  warm.mask_version = version;
  std::vector<double> cold_ms, warm_ms;
  for (int r = 0; r < kRepeats; ++r) {
    cold_ms.push_back(request_ms(rt, request, {}, stream));
    cold_infos.push_back(rt.last_dispatch());
    rt.run(request, stream, warm);  // a new mask_version after a cold call: a full request that arms the repeat
    warm_ms.push_back(request_ms(rt, request, warm, stream));
    if (!rt.last_dispatch().cache_hit)
      throw Error(ErrorCode::kInternal, "mask_version", "the warm request was not an exact repeat");
  }
  return {percentile(cold_ms, 0.5), percentile(warm_ms, 0.5)};
}

bool split_and_traversal_for_regret(const std::string& id) {
  return id.find(".tasc.") != std::string::npos &&
         (id.find(".split1.") != std::string::npos || id.find(".split2.") != std::string::npos ||
          id.find(".split4.") != std::string::npos);
}

int run_gpu(const RunArgs& a) {
  Stream stream = nullptr;
  TESSERA_CUDA_CHECK(cudaStreamCreate(&stream));
  Runtime rt = with_plan_table_option([&] { return Runtime(RuntimeOptions{.plan_table_path = a.plan_table}); });
  cudaDeviceProp prop{};
  TESSERA_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  fmt::print("tessera run: {} ({}), {}\n", prop.name, rt.arch(), rt.table_status());
  const auto cases = default_cases(a);
  fmt::print("{} cases ({} per family, evaluation split){}\n", cases.size(), a.cases_per_family,
             a.regret ? ", regret over split-1/2/4 ascending candidates" : "");
  json records = json::array();
  struct HostTimes {  // every new-mask request of every case (us)
    std::vector<double> dispatch, mask_state, select, prepare, select_prepare, launch, other;
  } host;
  int failures = 0;
  for (std::size_t ci = 0; ci < cases.size(); ++ci) {
    const corpus::Case& c = cases[ci];
    GpuCase g = make_gpu_case(c, a.seed + ci, stream);
    // First complete request of the case: mu(M), selection, preparation, kernel (buffers may grow here).
    TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream));
    auto t0 = Clock::now();
    rt.run(g.request, stream);
    TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream));
    const double first_ms = ms_since(t0);
    const DispatchInfo info = rt.last_dispatch();
    double err = NAN;
    if (a.check) {
      err = check_against_reference(g, stream);
      if (!(err <= a.max_error)) ++failures;
    }
    // Complete request on a new mask (mask_version 0: mu(M), selection and preparation each time), as every
    // denoising step is: median of kRepeats, with the host dispatch time of each call.
    // Exact repeats (mask_version): only the kernel is launched. Cold and warm are timed in interleaved rounds.
    std::vector<DispatchInfo> calls;
    const auto [cold_ms, warm_ms] = cold_and_warm_request_ms(rt, g.request, 0xabc000 + ci, stream, calls);
    std::vector<double> host_us;
    for (const DispatchInfo& d : calls) {
      host_us.push_back(d.host_dispatch_us);
      host.dispatch.push_back(d.host_dispatch_us);
      host.mask_state.push_back(d.host_mask_state_us);
      host.select.push_back(d.host_select_us);
      host.prepare.push_back(d.host_prepare_us);
      host.select_prepare.push_back(d.host_select_us + d.host_prepare_us);
      host.launch.push_back(d.host_launch_us);
      host.other.push_back(d.host_dispatch_us - d.host_mask_state_us - d.host_select_us - d.host_prepare_us -
                           d.host_launch_us);
    }
    const double kernel_ms = median_kernel_ms(rt, g, info.plan_id, 5, stream);
    // Direct: the same complete request (new mask) with T = B, and its kernel time.
    const std::string direct = rt.direct_plan(g.request);
    double direct_kernel_ms = NAN, direct_cold_ms = NAN;
    if (!direct.empty()) {
      RunOptions d;
      d.plan_id = direct;
      rt.run(g.request, stream, d);  // buffers grown for Direct too, as for the selected plan above
      direct_cold_ms = median_request_ms(rt, g.request, d, stream);
      direct_kernel_ms = median_kernel_ms(rt, g, direct, 5, stream);
    }
    double best_ms = kernel_ms;
    std::string best_plan = info.plan_id;
    int candidates = 0;
    if (a.regret) {
      for (const std::string& id : rt.eligible_plans(g.request)) {
        if (!split_and_traversal_for_regret(id)) continue;
        ++candidates;
        const double t = median_kernel_ms(rt, g, id, 3, stream);
        if (t < best_ms) best_ms = t, best_plan = id;
      }
    }
    json r = {{"family", c.meta.family},       {"source", c.meta.source_id},   {"n_q", c.meta.n_q},
              {"heads", c.mask.heads},         {"block_q", c.meta.block_q},    {"block_kv", c.meta.block_kv},
              {"density", info.stats.density}, {"plan", info.plan_id},         {"regime", info.regime},
              {"source_of_plan", info.source}, {"kernel_ms", kernel_ms},       {"cold_request_ms", cold_ms}, {"first_request_ms", first_ms},
              {"warm_request_ms", warm_ms},    {"host_dispatch_us", percentile(host_us, 0.5)},
              {"host_select_us", info.host_select_us}, {"tflops", g.tflops(kernel_ms)},
              {"direct_plan", direct},         {"direct_kernel_ms", direct_kernel_ms},
              {"direct_cold_request_ms", direct_cold_ms}, {"best_plan", best_plan}, {"best_kernel_ms", best_ms},
              {"candidates", candidates},
              {"regret", a.regret ? json(kernel_ms / best_ms) : json(nullptr)},  // --no-regret: not measured
              {"rel_l2_vs_reference", err}};
    {  // every new-mask call of the case (us, in call order): where the host-dispatch tail comes from
      json per_call = {{"dispatch", json::array()}, {"mask_state", json::array()}, {"select", json::array()},
                       {"prepare_enqueue", json::array()},
                       {"kernel_enqueue", json::array()}, {"speculation_hit", json::array()}};
      for (const DispatchInfo& d : calls) {
        per_call["dispatch"].push_back(d.host_dispatch_us);
        per_call["mask_state"].push_back(d.host_mask_state_us);
        per_call["select"].push_back(d.host_select_us);
        per_call["prepare_enqueue"].push_back(d.host_prepare_us);
        per_call["kernel_enqueue"].push_back(d.host_launch_us);
        per_call["speculation_hit"].push_back(d.prepare_speculation_hit);
      }
      r["host_calls_us"] = per_call;
    }
    fmt::print("  [{}/{}] {:<10} {:<22} N={:<6} H={:<2} d={:.3f} {:>8.3f} ms {:>6.1f} TF/s  regret {}  err {}  {}\n",
               ci + 1, cases.size(), c.meta.family, c.meta.source_id, c.meta.n_q, c.mask.heads, info.stats.density,
               kernel_ms, g.tflops(kernel_ms), a.regret ? fmt::format("{:.3f}", kernel_ms / best_ms) : "n/a",
               a.check ? fmt::format("{:.1e}", err) : "n/a", info.plan_id);
    records.push_back(r);
  }

  // Per-family summary.
  std::map<std::string, std::vector<json>> fam;
  std::vector<std::string> order;
  for (const json& r : records) {
    const std::string f = r["family"];
    if (!fam.count(f)) order.push_back(f);
    fam[f].push_back(r);
  }
  fmt::print("\n{:<10} {:>5} {:>7} {:>10} {:>10} {:>10} {:>7} {:>7} {:>8} {:>8} {:>8}  {}\n", "family", "cases", "density",
             "kernel ms", "cold ms", "warm ms", "TF/s", "regret", "vs Dir.", "cold/Dir", "err max", "plans chosen");
  json summary = json::array();
  bool no_direct = false;
  for (const std::string& f : order) {
    const auto& rs = fam[f];
    double dens = 0, kms = 0, cold = 0, warm = 0, pairs_ms = 0, tf_num = 0, errmax = 0;
    bool err_not_number = false;  // a checked case whose error is NaN (stored as null): the family's max is NaN
    std::vector<double> regrets, speedups, cold_vs_direct;
    std::map<std::string, int> plans;
    for (const json& r : rs) {
      dens += r["density"].get<double>();
      kms += r["kernel_ms"].get<double>();
      cold += r["cold_request_ms"].get<double>();
      warm += r["warm_request_ms"].get<double>();
      tf_num += r["tflops"].get<double>() * r["kernel_ms"].get<double>();
      pairs_ms += r["kernel_ms"].get<double>();
      if (r["regret"].is_number()) regrets.push_back(r["regret"].get<double>());
      const double dk = r["direct_kernel_ms"].is_number() ? r["direct_kernel_ms"].get<double>() : NAN;
      if (std::isfinite(dk)) speedups.push_back(dk / r["kernel_ms"].get<double>());
      const double dc = r["direct_cold_request_ms"].is_number() ? r["direct_cold_request_ms"].get<double>() : NAN;
      if (std::isfinite(dc)) cold_vs_direct.push_back(r["cold_request_ms"].get<double>() / dc);
      if (r["rel_l2_vs_reference"].is_number()) errmax = std::max(errmax, r["rel_l2_vs_reference"].get<double>());
      else err_not_number = true;
      plans[r["plan"].get<std::string>()] += 1;
    }
    const double n = static_cast<double>(rs.size());
    std::string chosen;
    for (const auto& [p, k] : plans) chosen += (chosen.empty() ? "" : ", ") + p + (k > 1 ? fmt::format(" x{}", k) : "");
    // "n/a": no Direct plan (T = B) for this key in the catalog (e.g. 32 x 16 blocks), so no ratio to it; for
    // the regret, --no-regret (no candidate timed).
    const auto ratio = [](const std::vector<double>& v) {
      return v.empty() ? std::string("n/a") : fmt::format("{:.3f}", geomean(v));
    };
    if (speedups.empty()) no_direct = true;
    const std::string err_text = !a.check ? "n/a" : err_not_number ? "nan" : fmt::format("{:.1e}", errmax);
    fmt::print("{:<10} {:>5} {:>7.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>7.1f} {:>7} {:>8} {:>8} {:>8}  {}\n",
               f, rs.size(), dens / n, kms / n, cold / n, warm / n, tf_num / pairs_ms, ratio(regrets),
               ratio(speedups), ratio(cold_vs_direct), err_text, chosen);
    summary.push_back({{"family", f}, {"cases", rs.size()}, {"mean_density", dens / n}, {"mean_kernel_ms", kms / n},
                       {"mean_cold_request_ms", cold / n}, {"mean_warm_request_ms", warm / n},
                       {"tflops", tf_num / pairs_ms},
                       {"geomean_regret", regrets.empty() ? json(nullptr) : json(geomean(regrets))},
                       {"geomean_speedup_over_direct", speedups.empty() ? json(nullptr) : json(geomean(speedups))},
                       {"geomean_cold_request_vs_direct",
                        cold_vs_direct.empty() ? json(nullptr) : json(geomean(cold_vs_direct))},
                       {"max_rel_l2", a.check && !err_not_number ? json(errmax) : json(nullptr)}, {"plans", plans}});
  }
  fmt::print("vs Dir. = Direct's kernel time / the selected plan's (higher is better); cold/Dir = the selected plan's "
             "cold request / Direct's (lower is better)\n");
  if (no_direct) fmt::print("n/a: the catalog has no Direct plan (T = B) for that key's block sizes\n");
  if (!a.regret || !a.check)
    fmt::print("n/a under {}: not measured in this run\n",
               !a.regret && !a.check ? "regret (--no-regret) and err max (--no-check)"
               : !a.regret           ? "regret (--no-regret)"
                                     : "err max (--no-check)");
  json host_json = json::object();
  fmt::print("host dispatch (new-mask requests, {} calls, excluding GPU waits), us; select_prepare = lookup + "
             "eligibility + preparation launch (issue #6's definition), mask_state = mu(M)'s launches, dispatch = the whole "
             "call:\n",
             host.dispatch.size());
  for (const auto& [name, v] : {std::pair{"dispatch", &host.dispatch}, std::pair{"mask_state", &host.mask_state},
                                std::pair{"select", &host.select},
                                std::pair{"prepare_enqueue", &host.prepare},
                                std::pair{"select_prepare", &host.select_prepare},
                                std::pair{"kernel_enqueue", &host.launch}, std::pair{"other", &host.other}}) {
    const double p50 = percentile(*v, 0.5), p95 = percentile(*v, 0.95), mx = percentile(*v, 1.0);
    fmt::print("  {:<16} P50 {:>7.1f}  P95 {:>7.1f}  max {:>7.1f}\n", name, p50, p95, mx);
    host_json[name] = {{"calls", v->size()}, {"p50", p50}, {"p95", p95}, {"max", mx}};
  }
  json out = {{"tool", "tessera run"}, {"git_revision", git_revision()}, {"gpu", prop.name}, {"arch", rt.arch()},
              {"table_status", rt.table_status()}, {"cases", records}, {"families", summary},
              {"host_dispatch_us", host_json}};
  write_text_file(a.json_path, out.dump(1) + "\n", "--json");
  fmt::print("wrote {}\n", a.json_path);
  TESSERA_CUDA_CHECK(cudaStreamDestroy(stream));
  if (failures) {
    fmt::print(stderr, "tessera run: {} case(s) differ from the GPU reference by more than {}\n", failures, a.max_error);
    return 1;
  }
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "The main job: run corpus cases through the runtime (embedded default when "
                                        "no option is given) and report per family");
  auto a = std::make_shared<RunArgs>();
  cmd->add_option("--families", a->families, "Families to run, space- or comma-separated (default: all, STA-real included)")
      ->delimiter(',');
  cmd->add_option("--cases-per-family", a->cases_per_family, "Evaluation-split cases per family")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--json", a->json_path, "Where to write the JSON report");
  cmd->add_flag("!--no-regret", a->regret, "Skip timing the candidate plans (no regret figures)");
  cmd->add_flag("!--no-check", a->check, "Skip the spot check against the GPU reference");
  cmd->add_option("--plan-table", a->plan_table,
                  "A plan table (JSON, from tessera compile-table; docs/selection.md) to select with instead of the "
                  "embedded one; checked before anything runs (the CPU default's requests are head_dim 64: it says so when "
                  "the table has no tree for their keys)");
  cmd->add_flag("--cpu", a->cpu, "Run the CPU plan executor on the scaled-down default even when a GPU is visible");
  auto seed_text = std::make_shared<std::string>("1");
  cmd->add_option("--seed", *seed_text, "Seed of the random Q/K/V (0 .. 2^64 - 1)");
  auto* cpf = cmd->get_option("--cases-per-family");
  auto* no_regret = cmd->get_option("--no-regret");
  auto* no_check = cmd->get_option("--no-check");
  cmd->callback([a, cpf, no_regret, no_check, seed_text] {
    a->seed = parse_seed(*seed_text, "--seed");
    // Arguments checked before anything is printed or run: family names (unknown or repeated -> error, from
    // corpus::selected_families), and the --json directory.
    corpus::CorpusOptions opt;
    opt.families = a->families;
    (void)families_option(opt);
    check_output_dir(a->json_path, "--json");
    check_json_not_sta_table(opt, a->json_path);
    check_sta_table_first(opt);
    // A user table is read and checked before anything runs (the CPU default selects as on sm90a).
    const bool gpu = !a->cpu && cuda_device_count() > 0;
    if (!a->plan_table.empty() && !gpu)
      with_plan_table_option([&] { return check_plan_table_file(a->plan_table, "sm90a"); });
    int rc = 0;
    if (gpu) {
      rc = run_gpu(*a);
    } else {
      if (!a->cpu) fmt::print("tessera run: no CUDA device visible: running the float64 CPU plan executor on a "
                              "scaled-down default (cropped corpus masks), not the GPU kernels\n");
      if (cpf->count() > 0 && a->cases_per_family != 1)
        fmt::print("tessera run: the CPU default runs one evaluation-split case per family; --cases-per-family {} "
                   "applies to the GPU path only\n", a->cases_per_family);
      if (no_regret->count() > 0 || no_check->count() > 0)
        fmt::print("tessera run: --no-regret and --no-check apply to the GPU path only (the CPU default times no "
                   "candidates and always compares with the float64 reference)\n");
      rc = run_cpu_default(a->families, a->json_path, a->seed, a->plan_table);
    }
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace tessera::tools
