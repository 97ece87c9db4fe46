#include "tessera_corpus/profile_refeature.hpp"

#include <fmt/core.h>

#include <atomic>
#include <map>
#include <mutex>

#include "tessera/error.hpp"
#include "tessera_corpus/mask_file.hpp"
#include "tessera_corpus/packed_mask.hpp"
#include "tessera_corpus/worker_pool.hpp"

namespace tessera::corpus {

MaskStats case_mask_stats(const Case& c) {
  const OwnedBlockMask m(c.mask);
  return build_mask_state_cpu(m.mask()).stats;
}

FeatureVector case_features(const Case& c, const MaskStats& stats) {
  return make_features(1, c.mask.heads, c.meta.n_q, stats);
}

int refeature_records(std::vector<ProfileRecord>& records, const std::vector<FeaturePresence>& present,
                      const CorpusOptions& opt, int threads, std::map<std::string, MaskStats>* stats,
                      const std::map<std::string, std::string>& mask_files) {
  if (present.size() != records.size())
    throw Error(ErrorCode::kInvalidArgument, "present",
                fmt::format("{} presence entries for {} records", present.size(), records.size()));
  // Distinct cases, each with its first record (the one whose old features are checked for every record:
  // records of one case carry the same features, check_profile_record_set).
  std::map<std::string, std::size_t> first;
  for (std::size_t i = 0; i < records.size(); ++i) first.emplace(records[i].case_id, i);
  struct Job {
    std::string id;
    std::size_t record = 0;
    FeatureVector features{};
    MaskStats stats;
    std::string error;
  };
  std::vector<Job> jobs;
  for (const auto& [id, i] : first) jobs.push_back({id, i, {}, {}, {}});
  std::atomic<std::size_t> next{0};
  run_workers(threads, jobs.size(), [&] {
    for (std::size_t j; (j = next.fetch_add(1)) < jobs.size();) {
      Job& job = jobs[j];
      try {
        const ProfileCaseId cid = parse_profile_case_id(job.id);
        const auto file = mask_files.find(job.id);
        const Case c = file != mask_files.end() ? read_mask_file(file->second)
                       : cid.whole_request      ? make_whole_request(cid.family, cid.index, opt)
                                                : make_case(cid.family, cid.index, opt);
        const ProfileRecord& first_record = records[job.record];
        if (const auto key = parse_request_key(first_record.key);
            key && (key->block_q != c.meta.block_q || key->block_kv != c.meta.block_kv))
          throw Error(ErrorCode::kFormatError, "records",
                      fmt::format("case '{}': key '{}' has blocks {}x{} but the case's mask has {}x{}", job.id,
                                  first_record.key, key->block_q, key->block_kv, c.meta.block_q, c.meta.block_kv));
        if (c.meta.source_id != cid.source)
          throw Error(ErrorCode::kFormatError, "records",
                      fmt::format("case '{}': the corpus case {} of family {} comes from source '{}'", job.id,
                                  cid.index, cid.family, c.meta.source_id));
        job.stats = case_mask_stats(c);
        job.features = case_features(c, job.stats);
        const ProfileRecord& old = records[job.record];
        for (int f = 0; f < kFeatureCount; ++f)
          if (present[job.record][f] && old.features[f] != job.features[f])
            throw Error(ErrorCode::kFormatError, "records",
                        fmt::format("case '{}': recorded feature '{}' = {} but the regenerated mask gives {}", job.id,
                                    feature_name(static_cast<Feature>(f)), old.features[f], job.features[f]));
      } catch (const Error& e) {
        // One message that names the case once (e.what() would repeat the "tessera: ...:" prefix). A case neither
        // in the corpus nor in a mask file: say where it was looked for.
        const bool named = e.message().find("'" + job.id + "'") != std::string::npos;
        const std::string where =
            mask_files.empty() || mask_files.count(job.id)
                ? std::string()
                : std::string(" (no --masks file holds this case id either)");
        job.error = (named ? e.message() : fmt::format("case '{}': {}", job.id, e.message())) + where;
      } catch (const std::exception& e) {
        job.error = fmt::format("case '{}': {}", job.id, e.what());
      }
    }
  });
  std::map<std::string, const FeatureVector*> features;
  for (const Job& job : jobs) {
    if (!job.error.empty()) throw Error(ErrorCode::kFormatError, "records", job.error);
    features.emplace(job.id, &job.features);
    if (stats) stats->emplace(job.id, job.stats);
  }
  for (ProfileRecord& r : records) r.features = *features.at(r.case_id);
  return static_cast<int>(jobs.size());
}

}  // namespace tessera::corpus
