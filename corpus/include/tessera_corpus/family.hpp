#pragma once
/// @file family.hpp
/// The corpus: nine workload families with the paper's block shapes (Q16K16 ... Q128K128, HD/DD density
/// variants), each fed by at least two sources (a sparsifier rule or model at a real model geometry), plus the
/// real STA family (FastVideo's HunyuanVideo table at B = 384, exactly re-expressed at 128 and 64).
/// A *case* is one mask [1, H, n_qb, n_kvb] (H heads of one layer at one step of one request) plus metadata.
/// A *chunk* is one synthetic request of a source (its own score-field seed); for the real STA family a chunk is
/// one layer. Splits (profiling / evaluation) are assigned per (source, chunk), so they never share a chunk.
/// Full corpus: 24 chunks x 7 steps x 2 layers = 336 cases per source, half of them profiling. Case index of a
/// model/rule family with S sources: chunks 0-7 (the original corpus) at source * 112 + chunk * 14 + within,
/// then chunks 8-23 (appended later for more profiling cases per source) at S * 112 + source * 224 +
/// (chunk - 8) * 14 + within; every case depends only on (seed, source, chunk, within), so the original indices
/// kept their bytes. --small: 2 chunks x 2 steps x 2 layers per source, nothing appended.
#include <cstdint>
#include <string>
#include <vector>

#include "tessera_corpus/geometry.hpp"
#include "tessera_corpus/packed_mask.hpp"

namespace tessera::corpus {

/// A family: block geometry and its stated mean-density band.
struct FamilySpec {
  std::string name;
  int block_q = 64, block_kv = 64;
  double density_lo = 0, density_hi = 1;  ///< the family's mean density must lie in [lo, hi]
  std::string note;
};

/// A source of a family: one sparsifier at one model geometry.
struct SourceSpec {
  std::string id;          ///< stable id, e.g. "q64-vsa-wan720"
  std::string family;
  std::string model;       ///< model_geometry() name
  std::string sparsifier;  ///< "sta", "vsa", "longcat", "sparge", "ssta", "spade", "svg", "radial"
  std::string kind;        ///< "real" (data), "rule" (rule-exact, input-independent), "model" (rule on synthetic scores)
  TokenOrder order;
  double param = 0;        ///< sparsity (vsa, longcat), density (sparge, svg), top-k (ssta), top-k fraction (spade), decay (radial)
  int dense_steps = 0;     ///< first denoising steps the method keeps dense (not in the corpus)
  int dense_layers = 0;    ///< first layers the method keeps dense (not in the corpus)
};

/// Corpus size options.
struct CorpusOptions {
  std::uint64_t seed = 0;
  bool small = false;           ///< scaled-down corpus for CI
  std::vector<std::string> families;  ///< empty = all
  std::string sta_table;        ///< path of the real STA table; empty = default_sta_table_path()
};

/// Metadata of one case (all of it goes into the safetensors header).
struct CaseMeta {
  std::string family, source_id, model, sparsifier, kind, token_order, split, head_ids, notes;
  std::int64_t n_q = 0, n_kv = 0, tokens_real = 0;
  int block_q = 0, block_kv = 0, heads = 0, step = 0, layer = 0, chunk = 0, index = 0;
  std::uint64_t seed = 0;
};

/// One case.
struct Case {
  CaseMeta meta;
  PackedMask mask;
};

/// The nine families plus "STA-real", in corpus order.
const std::vector<FamilySpec>& families();
/// Looks a family up; throws tessera::Error(kInvalidArgument, "family") for an unknown name.
const FamilySpec& family_spec(const std::string& name);
/// Sources of the model/rule families (STA-real's three geometries are implicit).
const std::vector<SourceSpec>& sources();

/// Number of cases of a family under the options (model/rule families: 336 per source, --small 8; STA-real: 405,
/// --small 9).
int case_count(const std::string& family, const CorpusOptions& opt);

/// Where a case comes from, known without generating its mask.
struct CaseOrigin {
  std::string source_id;  ///< as CaseMeta::source_id
  int chunk = 0;          ///< as CaseMeta::chunk (STA-real: the layer)
  std::string split;      ///< "profiling" or "evaluation", as CaseMeta::split
  /// 0: one of the original cases (model/rule families: chunks 0-7 of each source; STA-real's first 397 cases;
  /// every --small case); 1: appended later (chunks 8-23 of each source of the full corpus; STA-real's cases
  /// 397-404, eight more 64x64 re-expressions). Not in CaseMeta or the files.
  int generation = 0;
};

/// The origin of case `index` of a family in microseconds (no mask is generated); equals the corresponding fields
/// of make_case(family, index, opt).meta. Throws tessera::Error(kInvalidArgument, "index") when out of range.
CaseOrigin case_origin(const std::string& family, int index, const CorpusOptions& opt);

/// Produces case `index` (0 <= index < case_count) of a family, in memory, deterministically from opt.seed.
/// Throws tessera::Error(kInvalidArgument, "index") when out of range, (kIoError, "sta_table") when the real
/// table is needed and missing.
Case make_case(const std::string& family, int index, const CorpusOptions& opt);

/// Heads of the whole request of case `index`: the model geometry's head count (docs/corpus.md; STA-real: the
/// table's 24). Throws as make_case for a bad index or a missing STA table.
int request_heads(const std::string& family, int index, const CorpusOptions& opt);

/// The *whole request* of case `index`: the same (source, chunk, step, layer) with every head of the model's layer,
/// mask [1, H, n_qb, n_kvb] with H = request_heads() and head_ids 0..H-1 in order; every other metadata field as
/// make_case's (index included: the case it extends). The stored case's head h (head id j = its head_ids[h]) is
/// bit-identical to the whole request's head j, and its note the same. STA-real cases already hold all heads: for
/// them this equals make_case. Deterministic from opt.seed, like make_case. Throws as make_case.
Case make_whole_request(const std::string& family, int index, const CorpusOptions& opt);

/// The families selected by opt (all when opt.families is empty), in the order given. Throws
/// tessera::Error(kInvalidArgument, "family") for an unknown name, (kInvalidArgument, "families") for a name given
/// more than once.
std::vector<std::string> selected_families(const CorpusOptions& opt);

/// Checks everything make_case() reads besides opt itself, before any case is made: the selected families
/// (selected_families) and, when STA-real is among them, the real STA table (loaded and cached). Throws as
/// selected_families, kIoError when the table is missing or unreadable, (kFormatError, "sta_table")
/// when it is malformed.
void check_inputs(const CorpusOptions& opt);

}  // namespace tessera::corpus
