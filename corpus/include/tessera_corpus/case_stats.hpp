#pragma once
/// @file case_stats.hpp
/// Corpus-side statistics of a case that the runtime's MaskStats (mask_state.hpp) does not carry: run-length
/// histogram, per-row active-count spread and diagonal inclusion. Runs are maximal ranges of consecutive active
/// kv blocks in one row.
#include <array>
#include <cstdint>

#include "tessera_corpus/packed_mask.hpp"

namespace tessera::corpus {

/// Run-length histogram buckets: 1, 2, 3-4, 5-8, 9-16, 17-32, 33-64, 65+.
inline constexpr int kRunBuckets = 8;
const char* run_bucket_label(int bucket) noexcept;

struct CaseStats {
  std::int64_t rows = 0, blocks = 0, active = 0, runs = 0, empty_rows = 0;
  std::int64_t min_row = 0, max_row = 0;
  std::int64_t diag_rows = 0;  ///< rows whose diagonal kv block (the one holding the query block's first token) is active
  std::array<std::int64_t, kRunBuckets> run_hist{};  ///< runs per length bucket
  double density() const noexcept { return blocks ? double(active) / double(blocks) : 0.0; }
  double runs_per_row() const noexcept { return rows ? double(runs) / double(rows) : 0.0; }
  double diag_inclusion() const noexcept { return rows ? double(diag_rows) / double(rows) : 0.0; }
  /// Adds another case's counts (for family summaries).
  void add(const CaseStats& o) noexcept;
};

/// Statistics of a packed mask; block_q / block_kv (tokens) locate the diagonal of non-square geometries.
CaseStats case_stats(const PackedMask& m, int block_q, int block_kv);

}  // namespace tessera::corpus
