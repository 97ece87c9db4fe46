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

/// Generates every selected case with `threads` worker threads (0 = hardware concurrency) and writes the files and
/// the manifest. Output bytes depend only on opt (not on threads). Throws tessera::Error(kIoError, "out").
CorpusSummary write_corpus(const std::string& out, const CorpusOptions& opt, int threads,
                           const std::function<void(const std::string&)>& log = {});

}  // namespace tessera::corpus
