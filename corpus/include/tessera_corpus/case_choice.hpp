#pragma once
/// @file case_choice.hpp
/// Choosing a few corpus cases that still cover a family: used by `tessera profile` (the profiled cases) and by
/// `tessera run` (its embedded default).
#include <string>
#include <vector>

#include "tessera_corpus/family.hpp"

namespace tessera::corpus {

/// Up to `count` case indices of one family and split ("profiling" or "evaluation"), spread over its requests:
/// round-robin over the (source, chunk) groups ordered by (chunk, source), each group in a fixed pseudo-random
/// order of its steps and layers (mix64 of the index, rng.hpp: the same on every machine), so a small count still
/// covers every source. The original cases (CaseOrigin::generation 0) are all chosen before any appended one
/// (generation 1, chunks 8-23 of the full corpus; round-robin the same way), so the list for a count up to the
/// split's original cases is what it was before chunks were appended. Reads only case_origin(): no mask is
/// generated. Deterministic for given options.
/// Throws tessera::Error(kInvalidArgument) naming "split" (unknown split), "count" (negative) or "family".
std::vector<int> spread_cases(const std::string& family, const std::string& split, int count,
                              const CorpusOptions& opt);

}  // namespace tessera::corpus
