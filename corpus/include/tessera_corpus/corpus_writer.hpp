#pragma once
/// @file corpus_writer.hpp
/// Writes a corpus directory: one safetensors file per case at <out>/<family>/<source_id>/c<chunk>_<index>.safetensors
/// and <out>/manifest.json listing every file with family, source, chunk, split, step, layer, heads and density.
/// Splits are assigned per (source, chunk) (family.hpp), so profiling and evaluation never share a source file's
/// chunk.
#include <cstdint>
#include <functional>
#include <string>

#include "tessera_corpus/family.hpp"

namespace tessera::corpus {

/// Summary of a written corpus.
struct CorpusSummary {
  int cases = 0, evaluation = 0, profiling = 0;
  std::int64_t bytes = 0;
};

/// Generates every selected case with `threads` worker threads (0 = hardware concurrency; never more than the cases;
/// run_workers) and writes the files and the manifest. Output bytes depend only on opt (not on threads). The inputs
/// are checked first (check_inputs: family names, the STA table), so those errors leave nothing written. Throws
/// what check_inputs throws, tessera::Error(kIoError, "out") when the directory or a file cannot be written.
CorpusSummary write_corpus(const std::string& out, const CorpusOptions& opt, int threads,
                           const std::function<void(const std::string&)>& log = {});

/// Writes whole requests (family.hpp make_whole_request): for every selected family, the cases
/// spread_cases(family, split, per_family) chooses, each as one file with all of its model's heads, in the corpus's
/// file layout and format; the manifest has the corpus's fields plus "whole_requests": true, "requests_split",
/// "requests_per_family", and per entry "index" and "case_head_ids" (the heads the stored case holds). Checks the
/// inputs first like write_corpus. Throws what write_corpus throws, (kInvalidArgument, "split") for an unknown split
/// and (kInvalidArgument, "count") for per_family < 1.
CorpusSummary write_whole_requests(const std::string& out, const CorpusOptions& opt, const std::string& split,
                                   int per_family, int threads, const std::function<void(const std::string&)>& log = {});

}  // namespace tessera::corpus
