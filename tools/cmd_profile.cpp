// `tessera profile` (GPU): for each corpus case of the chosen splits (or each case named in a --case-ids file, or each
// of the user's mask files, --masks) and each eligible candidate plan, check the output against the GPU reference and
// record the median kernel latency. Writes one JSON record per line
// (src/core/table_compiler.hpp, docs/selection.md); resumable: cases already in the output file are skipped, and
// each case's records are appended in one write (src/core/profile_file.hpp).
#include <cuda_runtime.h>
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <map>
#include <regex>
#include <set>

#include "commands.hpp"
#include "families_option.hpp"
#include "core/profile_file.hpp"
#include "core/profile_record_check.hpp"
#include "core/table_compiler.hpp"
#include "cuda/check.cuh"
#include "gpu_case.hpp"
#include "tessera/error.hpp"
#include "tessera/mask_state_gpu.hpp"
#include "tessera/reference.hpp"
#include "tessera/runtime.hpp"
#include "tessera_corpus/case_choice.hpp"
#include "tessera_corpus/family.hpp"
#include "tessera_corpus/mask_file.hpp"
#include "tessera_corpus/profile_inputs.hpp"
#include "tessera_corpus/profile_refeature.hpp"
#include "tessera_corpus/worker_pool.hpp"
#include "write_file.hpp"

namespace tessera::tools {

namespace {

struct ProfileArgs {
  std::string out = "profile.jsonl";
  bool out_given = false;  ///< --out was given: an error with --list / --list-features, which print to stdout
  std::vector<std::string> families;
  std::vector<std::string> sources;  ///< --sources: only corpus cases of these source ids (docs/corpus.md)
  std::vector<std::string> masks;  ///< the user's mask files or directories (--masks) instead of corpus cases
  std::string case_ids;  ///< --case-ids: a file naming exactly the corpus cases to profile, one id a line
  bool case_ids_given = false;  ///< --case-ids was given (an empty path included: an error, not the default cases)
  std::vector<std::string> splits{"profiling", "evaluation"};
  int cases_per_split = 4;
  bool whole_requests = false;  ///< profile each chosen case's whole request (all heads of the layer) instead
  std::string plans;  ///< --plans: profile only plan ids matching this regex (ECMAScript), besides default and Direct
  int reps = 3;
  bool list_only = false;
  bool list_features = false;  ///< --list-features: each chosen case's features as JSON lines (CPU), then exit
  double max_error = 1e-2;
  std::uint64_t seed = 7;
};

bool profiled_candidate(const std::string& id) {
  return id.find(".tasc.") != std::string::npos && id.find(".split8.") == std::string::npos;
}

/// One case of the work list: a corpus case (family, index; its whole request with `whole`) or a mask file (path).
struct Item {
  std::string family;
  int index = 0;
  bool whole = false;   // the corpus case's whole request (make_whole_request), case id ".../whole"
  std::string path;     // a user mask file (--masks); empty for a corpus case
  std::string case_id;  // known before any mask is generated, so resumed cases are skipped cheaply
  std::string listing;  // the --list line
};

/// The item of corpus case `index` of `family` (its whole request with `whole`): id and --list line from
/// case_origin(), so no mask is generated.
Item corpus_item(const std::string& family, int index, bool whole, const corpus::CorpusOptions& opt) {
  const corpus::CaseOrigin o = corpus::case_origin(family, index, opt);
  const std::string id =
      fmt::format("{}/{}/{}{}", family, o.source_id, index, whole ? std::string(kWholeRequestSuffix) : std::string());
  return {family, index, whole, "", id, fmt::format("{} {} chunk {}", id, o.split, o.chunk)};
}

/// The case an item stands for: its mask file read, or the corpus case (or whole request) generated.
corpus::Case item_case(const Item& it, const corpus::CorpusOptions& opt) {
  if (!it.path.empty()) return corpus::read_mask_file(it.path);
  return it.whole ? corpus::make_whole_request(it.family, it.index, opt) : corpus::make_case(it.family, it.index, opt);
}

/// The --list-features line of an item: {"case", "split", "key", "features": {name: value, ...}}, the features
/// computed on the CPU as the profiling loop records them (the key of sm90a, as --list's ids; no GPU).
std::string features_line(const Item& it, const corpus::CorpusOptions& opt) {
  const corpus::Case c = item_case(it, opt);
  const ProfileRecord r = corpus::case_record_fields(c.meta, "sm90a", it.whole && it.path.empty());
  const FeatureVector f = corpus::case_features(c, corpus::case_mask_stats(c));
  nlohmann::ordered_json features = nlohmann::ordered_json::object();
  for (int i = 0; i < kFeatureCount; ++i) features[std::string(feature_name(static_cast<Feature>(i)))] = f[i];
  const nlohmann::ordered_json j = {{"case", r.case_id}, {"split", r.split}, {"key", r.key}, {"features", features}};
  return j.dump();
}

/// --list-features: one JSON object a line per item, in order, computed on every core; nothing is printed when an
/// item fails (its error, the first in order, is rethrown).
void print_features(const std::vector<Item>& items, const corpus::CorpusOptions& opt) {
  std::vector<std::string> lines(items.size());
  std::vector<std::exception_ptr> errors(items.size());
  std::atomic<std::size_t> next{0};
  corpus::run_workers(0, items.size(), [&] {
    for (std::size_t n; (n = next.fetch_add(1)) < items.size();) try {
        lines[n] = features_line(items[n], opt);
      } catch (...) {
        errors[n] = std::current_exception();
      }
  });
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  for (const std::string& line : lines) fmt::print("{}\n", line);
}

void run_profile(const ProfileArgs& a) {
  if (a.out_given && (a.list_only || a.list_features))  // else the listing would go to stdout and --out be unused
    throw Error(ErrorCode::kInvalidArgument, "--out", "the listing modes print to stdout; --out is for profiling");
  std::regex plan_filter;
  try {
    plan_filter = std::regex(a.plans.empty() ? std::string(".") : a.plans);
  } catch (const std::regex_error& e) {
    throw Error(ErrorCode::kInvalidArgument, "--plans", fmt::format("'{}' is not a regular expression: {}", a.plans, e.what()));
  }
  std::set<std::string> seen_splits;
  for (const std::string& sp : a.splits) {
    if (sp != "profiling" && sp != "evaluation")
      throw Error(ErrorCode::kInvalidArgument, "--splits",
                  fmt::format("unknown split '{}' (the corpus splits are 'profiling' and 'evaluation')", sp));
    if (!seen_splits.insert(sp).second)  // its cases would be profiled twice: duplicate records in --out
      throw Error(ErrorCode::kInvalidArgument, "--splits", fmt::format("'{}' is given more than once", sp));
  }
  corpus::CorpusOptions opt;
  opt.families = a.families;
  const std::set<std::string> sources(a.sources.begin(), a.sources.end());
  if (!sources.empty()) {  // every named source must exist in the selected families, or the list would be silently short
    if (sources.size() != a.sources.size())
      for (const std::string& s : a.sources)
        if (std::count(a.sources.begin(), a.sources.end(), s) > 1)
          throw Error(ErrorCode::kInvalidArgument, "--sources", fmt::format("'{}' is given more than once", s));
    std::map<std::string, std::set<std::string>> of_family;  // family -> its source ids
    std::set<std::string> known;
    for (const std::string& fam : families_option(opt))
      for (int i = 0; i < corpus::case_count(fam, opt); ++i)
        known.insert(*of_family[fam].insert(corpus::case_origin(fam, i, opt).source_id).first);
    for (const std::string& s : a.sources)
      if (!known.count(s))
        throw Error(ErrorCode::kInvalidArgument, "--sources",
                    fmt::format("'{}' is not a source of the selected families (known: {})", s, fmt::join(known, ", ")));
    for (const auto& [fam, ids] : of_family)  // a selected family none of whose sources is named: no case at all
      if (std::none_of(ids.begin(), ids.end(), [&](const std::string& s) { return sources.count(s) > 0; }))
        throw Error(ErrorCode::kInvalidArgument, "--sources",
                    fmt::format("names no source of family {} (its sources: {}); select fewer --families", fam,
                                fmt::join(ids, ", ")));
  }
  // The work list first, so progress and ETA are known: corpus cases (family, index) or mask files (path).
  std::vector<Item> items;
  if (!a.masks.empty()) {
    for (const corpus::MaskFileInput& in : corpus::list_mask_files(a.masks, a.splits)) {
      const ProfileRecord r = corpus::case_record_fields(in.meta, "sm90a");
      items.push_back({"", 0, false, in.path, in.case_id,
                       fmt::format("{} {} request {} {}", in.case_id, in.meta.split, r.request, in.path)});
    }
  } else if (a.case_ids_given) {
    for (const corpus::CaseIdInput& in : corpus::read_case_ids(a.case_ids, opt))
      items.push_back(corpus_item(in.family, in.index, in.whole_request, opt));
  } else {
    for (const std::string& fam : families_option(opt))
      for (const std::string& split : a.splits) {
        std::vector<int> chosen = corpus::spread_cases(fam, split, sources.empty() ? a.cases_per_split : 1 << 30, opt);
        if (!sources.empty()) {  // the spread order, restricted to the named sources, then cut to the count
          std::erase_if(chosen, [&](int i) { return !sources.count(corpus::case_origin(fam, i, opt).source_id); });
          if (static_cast<int>(chosen.size()) > a.cases_per_split) chosen.resize(std::size_t(a.cases_per_split));
        }
        if (static_cast<int>(chosen.size()) < a.cases_per_split)  // stderr: --list's stdout stays one case a line
          fmt::print(stderr, "tessera profile: {}{} has {} {}-split cases, fewer than --cases-per-split {}: all {} are taken\n",
                     fam, sources.empty() ? std::string() : fmt::format(" (--sources {})", fmt::join(a.sources, ",")),
                     chosen.size(), split, a.cases_per_split, chosen.size());
        for (const int i : chosen) items.push_back(corpus_item(fam, i, a.whole_requests, opt));
      }
  }
  if (a.list_features) {
    print_features(items, opt);
    return;
  }
  if (a.list_only) {
    for (const Item& it : items) fmt::print("{}\n", it.listing);
    return;
  }
  check_output_dir(a.out, "--out");  // appended after each case: an unwritable path fails before any profiling
  // --out is appended to and repaired on resume: it must not be one of the inputs (same file under any name).
  if (a.case_ids_given) check_not_input(a.out, a.case_ids, "--out", "--case-ids");
  for (const Item& it : items)
    if (!it.path.empty()) check_not_input(a.out, it.path, "--out", "--masks");
  if (cuda_device_count() == 0) throw Error(ErrorCode::kUnsupported, "device", "tessera profile needs a CUDA GPU");
  int repaired = 0;
  const std::set<std::string> done = resume_profile_file(a.out, &repaired);
  if (repaired)
    fmt::print("{}: removed {} lines of a case cut off by an earlier stop (it is profiled again)\n", a.out, repaired);
  Stream stream = nullptr;
  TESSERA_CUDA_CHECK(cudaStreamCreate(&stream));
  Runtime rt(RuntimeOptions{.plan_table_path = "", .use_plan_table = false, .max_workspace_bytes = -1});

  const auto t_start = std::chrono::steady_clock::now();
  int processed = 0;
  for (std::size_t n = 0; n < items.size(); ++n) {
    const std::string& case_id = items[n].case_id;
    if (done.count(case_id)) continue;
    const corpus::Case c = item_case(items[n], opt);
    GpuCase g = make_gpu_case(c, a.seed + n, stream);
    rt.run(g.request, stream);  // default plan: mu(M) statistics and the default/direct ids
    const DispatchInfo base = rt.last_dispatch();
    const std::string direct = rt.direct_plan(g.request);
    // Case id, source, request, split, key. A whole request keeps its case's request: folds keep the two together.
    ProfileRecord rec = corpus::case_record_fields(c.meta, rt.arch(), items[n].whole && items[n].path.empty());
    // Features from the CPU mu(M), bit for bit the GPU's, and with every statistic counted (the runtime skips the
    // coarsened pairs when no table reads them): the same as `tessera profile-refeature` derives.
    rec.features = corpus::case_features(c, corpus::case_mask_stats(c));
    // Reference once per case.
    DeviceTensor ref = make_device_tensor(DType::kFloat32, {1, c.meta.n_q, c.mask.heads, 128});
    {
      AttentionRequest r = g.request;
      r.o = ref.view;
      const DeviceMaskState ms = build_mask_state_gpu(r.mask, stream);
      reference_attention_gpu(r, ms, stream);
    }
    std::vector<ProfileRecord> records;  // written together once the case is done
    for (const std::string& id : rt.eligible_plans(g.request)) {
      if (!profiled_candidate(id)) continue;
      // The default and Direct plans are always timed: the table compiler's base plan and speedup need them.
      if (id != base.plan_id && id != direct && !std::regex_search(id, plan_filter)) continue;
      rec.plan = id;
      // The default plan is often the Direct plan itself: then the record carries both roles.
      rec.role = id == base.plan_id ? (id == direct ? "default,direct" : "default") : (id == direct ? "direct" : "");
      rec.latency_us = median_kernel_ms(rt, g, id, a.reps, stream) * 1000.0;
      const double err = relative_l2_gpu(g.o.view, ref.view, stream);
      rec.valid = err <= a.max_error;
      if (!rec.valid) fmt::print(stderr, "  invalid: {} on {}: rel L2 {:.3e}\n", id, case_id, err);
      records.push_back(rec);
    }
    append_case_records(a.out, records);
    const std::size_t plans = records.size();
    ++processed;
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    const double eta = el / processed * static_cast<double>(items.size() - n - 1);
    fmt::print("[{}/{}] {} {} plans, density {:.3f}; elapsed {:.0f} s, ETA {:.0f} s\n", n + 1, items.size(), case_id,
               plans, base.stats.density, el, eta);
    std::fflush(stdout);  // progress reaches a log file even if the run is stopped by a time limit
  }
  TESSERA_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace

void add_profile_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("profile", "Profile every eligible plan on corpus cases or mask files (GPU); writes JSON lines");
  auto a = std::make_shared<ProfileArgs>();
  auto* out = cmd->add_option("--out", a->out, "Profile records (JSON lines; appended, resumable); not with --list or "
                                               "--list-features, which print to stdout");
  auto* families =
      cmd->add_option("--families", a->families, "Families, space- or comma-separated (default: all)")->delimiter(',');
  auto* splits = cmd->add_option("--splits", a->splits,
                                 "Corpus splits to profile (profiling, evaluation); with --masks, the files' splits");
  auto* per_split =
      cmd->add_option("--cases-per-split", a->cases_per_split, "Cases per family and split")->check(CLI::Range(1, 100000));
  auto* sources = cmd->add_option("--sources", a->sources,
                                  "Only corpus cases of these source ids, space- or comma-separated (docs/corpus.md; "
                                  "e.g. sta-hv768-b64); --cases-per-split then counts their cases")
                      ->delimiter(',');
  cmd->add_option("--masks", a->masks,
                  "Profile these mask files (corpus format, docs/corpus.md) or directories of .safetensors files "
                  "instead of corpus cases")
      ->excludes(families)
      ->excludes(per_split)
      ->excludes(sources);
  auto* whole = cmd->add_flag("--whole-requests", a->whole_requests,
                              "Profile each chosen case's whole request: every head of the model's layer (docs/corpus.md), "
                              "case id '<family>/<source>/<index>/whole'");
  whole->excludes("--masks");
  cmd->add_option("--plans", a->plans,
                  "Profile only the eligible plans whose id matches this regular expression (e.g. '\\.wgmma\\.'), "
                  "besides each case's default and Direct plans");
  cmd->add_option("--reps", a->reps, "Timed repetitions per plan (median)")->check(CLI::Range(1, 1000));
  // The ids say family, case, split and whether it is the whole request.
  auto* case_ids = cmd->add_option("--case-ids", a->case_ids,
                                   "Profile exactly these corpus cases: one id per line, '<family>/<source>/<index>' "
                                   "or '.../whole'; blank lines and lines starting with '#' are skipped "
                                   "(docs/selection.md)")
                       ->excludes("--masks")
                       ->excludes(families)
                       ->excludes(per_split)
                       ->excludes(sources)
                       ->excludes(whole)
                       ->excludes(splits);
  // The two listings name splits differently, and scripts read both: --list as --splits takes them (the corpus's
  // words), --list-features as the records write them (docs/selection.md).
  auto* list = cmd->add_flag("--list", a->list_only,
                             "Print the chosen cases and exit, one a line: '<case id> <split> chunk <chunk>' (--masks: "
                             "'<case id> <split> request <request> <path>'), the split as --splits names it "
                             "(profiling, evaluation); no GPU needed");
  cmd->add_flag("--list-features", a->list_features,
                "Print each chosen case's plan-table features as one JSON object a line ({\"case\", \"split\", "
                "\"key\", \"features\"}, computed on the CPU; \"split\" as the records write it: profile, eval) and "
                "exit; no GPU needed")
      ->excludes(list);
  cmd->callback([a, case_ids, out] {
    a->case_ids_given = case_ids->count() > 0;
    a->out_given = out->count() > 0;
    run_profile(*a);
  });
}

}  // namespace tessera::tools
