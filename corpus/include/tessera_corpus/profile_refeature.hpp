#pragma once
/// @file profile_refeature.hpp
/// Re-derives the features of existing profile records (`tessera profile-refeature`, docs/selection.md) without a
/// GPU: corpus cases are deterministic, so each record's mask is regenerated from its case id and counted with the
/// CPU twin of mu(M), whose counters equal the GPU's bit for bit. Lets a feature-schema change be evaluated on
/// records profiled under an older schema.
/// Uses the records type of src/core/table_compiler.hpp (include src/ as the tools and tests do).
#include <map>
#include <string>
#include <vector>

#include "core/features.hpp"
#include "core/profile_record_check.hpp"  // ProfileCaseId, parse_profile_case_id
#include "core/table_compiler.hpp"
#include "tessera/mask_state.hpp"
#include "tessera_corpus/family.hpp"

namespace tessera::corpus {

/// s(M) of a case as the runtime computes it: the CPU mu(M) (build_mask_state_cpu) of its mask [1, H, n_qb, n_kvb].
MaskStats case_mask_stats(const Case& c);

/// The features `tessera profile` records for a case of head_dim 128: make_features(1, H, n_q, stats).
FeatureVector case_features(const Case& c, const MaskStats& stats);

/// Re-derives the features of every record. Each distinct case id is regenerated once (make_case(family, index,
/// opt)) on up to `threads` threads (<= 0: all cores); its features replace the records' features. Checks, for each
/// case, that the case's source equals the id's source and that every feature marked present in `present`
/// (parallel to `records`, as profile_record_from_json reports it) equals the regenerated value exactly; a
/// mismatch throws Error(kFormatError, "records") naming the case, the feature and both values (the records do
/// not come from this corpus, or the corpus changed). Errors of make_case (unknown family, index out of range,
/// missing STA table) are rethrown with the case id. Returns the number of distinct cases; `stats`, when given,
/// receives each case's MaskStats by case id (for offline analysis of candidate features). `mask_files` maps case
/// ids to mask files (the records of `tessera profile --masks`, e.g. bench/generic_masks.py's): such a case is read
/// from its file (read_mask_file) instead of regenerated, with the same source and feature checks.
int refeature_records(std::vector<ProfileRecord>& records, const std::vector<FeaturePresence>& present,
                      const CorpusOptions& opt, int threads, std::map<std::string, MaskStats>* stats = nullptr,
                      const std::map<std::string, std::string>& mask_files = {});

}  // namespace tessera::corpus
