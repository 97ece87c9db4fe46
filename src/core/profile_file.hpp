// The profile records file of `tessera profile`: one JSON record per line (table_compiler.hpp), appended one
// case at a time, so that a run stopped by a time limit can be resumed (docs/selection.md, "Profiling"); and its
// reading by `tessera compile-table` and `tessera profile-refeature`.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/table_compiler.hpp"

namespace tessera {

/// Opens a records file for resuming and returns the ids of the cases it already holds. A missing file holds
/// none. A file that does not end in a newline was stopped in the middle of a write: the partial last line and
/// every record of the last complete line's case (that case's block may be incomplete) are removed, the file is
/// rewritten without them, and `*repaired` (when given) is set to the number of lines removed. A partial last line
/// that does not start with '{' (no cut of a record) is an error and the file is left untouched.
/// Throws Error(kFormatError, "--out", "<path> line <n>: ...") for a complete line that is not a record, and
/// Error(kIoError, "--out") when the file cannot be read or rewritten.
std::set<std::string> resume_profile_file(const std::string& path, int* repaired = nullptr);

/// Appends all records of one case to the file with one write() of whole lines, then flushes it to the OS, so a
/// run stopped between cases leaves only whole cases. Throws Error(kIoError, "--out") on failure.
void append_case_records(const std::string& path, const std::vector<ProfileRecord>& records);

/// Reads a whole records file named by option `--in`, plain or gzip-compressed (`*.jsonl.gz`, as committed under
/// bench/results; told apart by its content, not its name): each line not blank (spaces, tabs, CR) is parsed (profile_record_from_json, with
/// `present` when given: records of an older feature schema are accepted and their features marked) and checked
/// (check_profile_record against `arch`, then check_profile_record_set). Throws Error(kIoError, "--in") for a
/// directory or an unreadable file, Error(kFormatError, "--in", "<path> line <n>: ...") for a bad record and
/// Error(kFormatError, "--in") for a file with no record or a bad record set.
/// `need_profiling`: as check_profile_record_set's (false for `tessera profile-refeature`, which compiles nothing).
std::vector<ProfileRecord> read_profile_records(const std::string& path, std::string_view arch,
                                                std::vector<FeaturePresence>* present = nullptr,
                                                bool need_profiling = true);

}  // namespace tessera
