#pragma once
/// @file profile_inputs.hpp
/// What `tessera profile` profiles and how its records name it (docs/selection.md): corpus cases (chosen per family and
/// split, or named one by one in a file of case ids: `--case-ids`), or the user's own mask files (`--masks`: the
/// corpus file format of mask_file.hpp, given as files or directories of .safetensors files). Host-only, so the case
/// list and the records' identity fields are testable without a GPU.
/// Uses the records type of src/core/table_compiler.hpp (include src/ as the tools and tests do).
#include <string>
#include <vector>

#include "core/table_compiler.hpp"
#include "tessera_corpus/family.hpp"

namespace tessera::corpus {

/// A record carrying the identity fields of case `m` as `tessera profile` writes them (plan, latency, features and
/// role left empty): case "<family>/<source_id>/<index>" (with `whole_request`, the whole request of that case:
/// "<family>/<source_id>/<index>/whole"), source = source_id, request "<source_id>#<chunk>", split
/// "profile" (corpus split "profiling") or "eval" ("evaluation"), key "<arch>.bf16.d128.q<B_Q>.kv<B_KV>" (the
/// profiler times head_dim 128, bf16). Throws Error(kInvalidArgument, "case") for a family or source that is empty,
/// a family containing '/', or a split that is neither corpus split.
ProfileRecord case_record_fields(const CaseMeta& m, const std::string& arch, bool whole_request = false);

/// One user mask file to profile.
struct MaskFileInput {
  std::string path;     ///< the file, as found (a directory's files are "<dir>/<name>")
  CaseMeta meta;        ///< its metadata (the mask is read again when the case is profiled)
  std::string case_id;  ///< case_record_fields(meta, ...).case_id
};

/// The mask files named by `paths` (`--masks`), in order: a file is taken as given (any name), a directory
/// contributes its regular files ending in ".safetensors" (not its subdirectories), sorted by name. Every file is
/// read and checked (read_mask_file). Only files whose metadata split is in `splits` ("profiling", "evaluation")
/// are returned. Errors: Error(kInvalidArgument, "--masks") for no path, a path given twice (however spelled), a
/// directory with no .safetensors file (when its subdirectories hold some, the message says that they are not
/// searched and names the first such one, depth first by name), two files holding the same case id (both named:
/// family, source_id and index must tell cases apart), or no file in `splits`; Error(kIoError, "--masks") naming
/// the path for a missing or unreadable one (read_mask_file's message); read_mask_file's kFormatError for a
/// malformed file and case_record_fields's errors, with the file's path as argument.
std::vector<MaskFileInput> list_mask_files(const std::vector<std::string>& paths,
                                           const std::vector<std::string>& splits);

/// One corpus case named in a file of case ids (`--case-ids`).
struct CaseIdInput {
  std::string family;
  int index = 0;               ///< the case's index in its family (make_case, case_origin)
  bool whole_request = false;  ///< the id ends in "/whole": the case's whole request (make_whole_request)
  std::string case_id;         ///< "<family>/<source>/<index>" or ".../whole", as case_record_fields writes it
};

/// The corpus cases named in the text file `path` (`--case-ids`), in file order: one case id per line,
/// "<family>/<source>/<index>" or "<family>/<source>/<index>/whole" (parse_profile_case_id), surrounding whitespace
/// trimmed (and a UTF-8 byte-order mark at the start of the file skipped); blank lines and lines starting with '#'
/// are skipped ('#' after an id is not a comment: an error). Each id must name a case of the corpus `opt`
/// describes (opt.small and opt.seed; opt.families is not read): a corpus family (families()), 0 <= index <
/// case_count(family, opt), and the source of that case (case_origin(family, index, opt).source_id). Reads only
/// case_origin(): no mask is generated. Every line is checked before anything is returned. Errors:
/// Error(kInvalidArgument, "--case-ids", "empty path") for an empty `path`; Error(kIoError, "--case-ids", "<path>:
/// cannot be read ...") for a missing or unreadable file (a directory included); Error(kInvalidArgument,
/// "--case-ids", "<path>:<line>: ...") for a line holding '#' after an id, ',' or whitespace inside (several ids on
/// a line: "one case id per line") or a byte other than printable ASCII, a malformed id (parse_profile_case_id's
/// message), an unknown family (the known ones listed), an index out of range (the family's case count given), a
/// source that is not the case's (the case's source named) or an id given twice (both line numbers named);
/// Error(kInvalidArgument, "--case-ids", "<path>: no case id ...") for a file without any id. The messages quote
/// a line's id with bytes other than printable ASCII as \xNN and cut after ~80 characters.
std::vector<CaseIdInput> read_case_ids(const std::string& path, const CorpusOptions& opt);

}  // namespace tessera::corpus
