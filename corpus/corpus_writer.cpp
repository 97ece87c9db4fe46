#include "tessera_corpus/corpus_writer.hpp"

#include <fmt/core.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "tessera/error.hpp"
#include "tessera_corpus/mask_file.hpp"
#include "tessera_corpus/worker_pool.hpp"

namespace tessera::corpus {

CorpusSummary write_corpus(const std::string& out, const CorpusOptions& opt, int threads,
                           const std::function<void(const std::string&)>& log) {
  namespace fs = std::filesystem;
  check_inputs(opt);  // unknown or repeated families, a missing STA table: before anything is written
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw Error(ErrorCode::kIoError, "out", fmt::format("cannot create '{}': {}", out, ec.message()));
  struct Job {
    std::string family;
    int index;
  };
  std::vector<Job> jobs;
  for (const auto& f : selected_families(opt))
    for (int i = 0, n = case_count(f, opt); i < n; ++i) jobs.push_back({f, i});
  std::vector<nlohmann::json> entries(jobs.size());
  std::vector<std::int64_t> sizes(jobs.size());
  std::atomic<std::size_t> next{0};
  std::mutex err_mu;
  std::exception_ptr err;
  auto worker = [&] {
    for (std::size_t j; (j = next++) < jobs.size();) {
      try {
        const Case c = make_case(jobs[j].family, jobs[j].index, opt);
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
                                            "small: 2 chunks per source"},
                             {"cases", entries}};
  const std::string manifest_path = (fs::path(out) / "manifest.json").string();
  std::ofstream mf(manifest_path);
  if (!mf) throw Error(ErrorCode::kIoError, "out", fmt::format("cannot write '{}'", manifest_path));
  mf << manifest.dump(1) << "\n";
  mf.close();
  if (!mf) throw Error(ErrorCode::kIoError, "out", fmt::format("write to '{}' failed", manifest_path));
  if (log) log(fmt::format("{} cases ({} profiling, {} evaluation), {:.1f} MB of masks", s.cases, s.profiling, s.evaluation, double(s.bytes) / 1e6));
  return s;
}

}  // namespace tessera::corpus
