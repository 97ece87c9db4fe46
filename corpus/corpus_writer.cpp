#include "tessera_corpus/corpus_writer.hpp"

#include <fmt/core.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "tessera/error.hpp"
#include "tessera_corpus/case_choice.hpp"
#include "tessera_corpus/mask_file.hpp"
#include "tessera_corpus/worker_pool.hpp"

namespace tessera::corpus {

namespace {

struct Job {
  std::string family;
  int index;
};

// Writes one file per job (make(job) gives its case) and the manifest; `extra` adds top-level manifest fields,
// `entry_extra` fields of one entry. Shared by write_corpus and write_whole_requests.
CorpusSummary write_cases(const std::string& out, const std::vector<Job>& jobs, int threads,
                          const std::function<Case(const Job&)>& make, const nlohmann::json& extra,
                          const std::function<void(const Job&, const Case&, nlohmann::json&)>& entry_extra,
                          const CorpusOptions& opt, const std::function<void(const std::string&)>& log) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw Error(ErrorCode::kIoError, "out", fmt::format("cannot create '{}': {}", out, ec.message()));
  std::vector<nlohmann::json> entries(jobs.size());
  std::vector<std::int64_t> sizes(jobs.size());
  std::atomic<std::size_t> next{0};
  std::mutex err_mu;
  std::exception_ptr err;
  auto worker = [&] {
    for (std::size_t j; (j = next++) < jobs.size();) {
      try {
        const Case c = make(jobs[j]);
        const auto& m = c.meta;
        const fs::path rel = fs::path(m.family) / m.source_id / fmt::format("c{:02}_{:04}.safetensors", m.chunk, m.index);
        fs::create_directories(fs::path(out) / rel.parent_path());
        write_mask_file((fs::path(out) / rel).string(), c);
        const double total = double(c.mask.heads) * double(c.mask.n_qb) * double(c.mask.n_kvb);
        entries[j] = {{"file", rel.generic_string()}, {"family", m.family}, {"source_id", m.source_id},
                      {"model", m.model}, {"sparsifier", m.sparsifier}, {"kind", m.kind}, {"chunk", m.chunk},
                      {"split", m.split}, {"step", m.step}, {"layer", m.layer}, {"heads", m.heads},
                      {"block_q", m.block_q}, {"block_kv", m.block_kv}, {"n_q", m.n_q}, {"n_kv", m.n_kv},
                      {"density", total > 0 ? double(c.mask.count()) / total : 0.0}};
        if (entry_extra) entry_extra(jobs[j], c, entries[j]);
        sizes[j] = std::int64_t(c.mask.bits.size());
      } catch (...) {
        std::lock_guard<std::mutex> lock(err_mu);
        if (!err) err = std::current_exception();
        next = jobs.size();
      }
    }
  };
  run_workers(threads, jobs.size(), worker);
  if (err) std::rethrow_exception(err);
  CorpusSummary s;
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    ++s.cases;
    (entries[j]["split"] == "evaluation" ? s.evaluation : s.profiling)++;
    s.bytes += sizes[j];
  }
  nlohmann::json manifest = {{"format", "tessera-mask-corpus-v1"}, {"seed", std::to_string(opt.seed)},
                             {"small", opt.small}, {"split_rule", "by (source_id, chunk): even chunk index -> "
                                                                  "profiling, odd -> evaluation; STA-real chunk = layer"},
                             {"chunk_rule", "full corpus: 24 chunks per source, chunks 0-7 the original "
                                            "corpus (indices unchanged), chunks 8-23 appended after all of them; "
                                            "small: 2 chunks per source"}};
  for (const auto& [k, v] : extra.items()) manifest[k] = v;
  manifest["cases"] = entries;
  const std::string manifest_path = (fs::path(out) / "manifest.json").string();
  std::ofstream mf(manifest_path);
  if (!mf) throw Error(ErrorCode::kIoError, "out", fmt::format("cannot write '{}'", manifest_path));
  mf << manifest.dump(1) << "\n";
  mf.close();
  if (!mf) throw Error(ErrorCode::kIoError, "out", fmt::format("write to '{}' failed", manifest_path));
  return s;
}

// The head ids the stored case holds (1-4 heads: a small fraction of the whole request's work).
std::string case_head_ids(const std::string& family, int index, const CorpusOptions& opt) {
  return make_case(family, index, opt).meta.head_ids;
}

}  // namespace

CorpusSummary write_corpus(const std::string& out, const CorpusOptions& opt, int threads,
                           const std::function<void(const std::string&)>& log) {
  check_inputs(opt);  // unknown or repeated families, a missing STA table: before anything is written
  std::vector<Job> jobs;
  for (const auto& f : selected_families(opt))
    for (int i = 0, n = case_count(f, opt); i < n; ++i) jobs.push_back({f, i});
  const CorpusSummary s = write_cases(
      out, jobs, threads, [&](const Job& j) { return make_case(j.family, j.index, opt); }, nlohmann::json::object(),
      {}, opt, log);
  if (log) log(fmt::format("{} cases ({} profiling, {} evaluation), {:.1f} MB of masks", s.cases, s.profiling, s.evaluation, double(s.bytes) / 1e6));
  return s;
}

CorpusSummary write_whole_requests(const std::string& out, const CorpusOptions& opt, const std::string& split,
                                   int per_family, int threads, const std::function<void(const std::string&)>& log) {
  check_inputs(opt);
  if (per_family < 1) throw Error(ErrorCode::kInvalidArgument, "count", fmt::format("{} requests per family: must be >= 1", per_family));
  std::vector<Job> jobs;
  for (const auto& f : selected_families(opt))
    for (int i : spread_cases(f, split, per_family, opt)) jobs.push_back({f, i});  // throws naming "split"
  const nlohmann::json extra = {
      {"whole_requests", true}, {"requests_split", split}, {"requests_per_family", per_family},
      {"request_rule", "one file per chosen case (spread_cases of the split): the case's (source, chunk, step, "
                       "layer) with every head of the model's layer (head_ids 0..H-1); the stored case's heads "
                       "(case_head_ids) are bit-identical to these heads"}};
  const CorpusSummary s = write_cases(
      out, jobs, threads, [&](const Job& j) { return make_whole_request(j.family, j.index, opt); }, extra,
      [&](const Job& j, const Case&, nlohmann::json& e) {
        e["index"] = j.index;
        e["case_head_ids"] = case_head_ids(j.family, j.index, opt);
      },
      opt, log);
  if (log) log(fmt::format("{} whole requests ({} split), {:.1f} MB of masks", s.cases, split, double(s.bytes) / 1e6));
  return s;
}

}  // namespace tessera::corpus
