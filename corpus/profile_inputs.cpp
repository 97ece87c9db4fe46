#include "tessera_corpus/profile_inputs.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <utility>

#include "core/profile_record_check.hpp"  // kWholeRequestSuffix, parse_profile_case_id
#include "tessera/error.hpp"
#include "tessera/geometry.hpp"
#include "tessera_corpus/mask_file.hpp"

namespace tessera::corpus {

ProfileRecord case_record_fields(const CaseMeta& m, const std::string& arch, bool whole_request) {
  if (m.family.empty() || m.source_id.empty())
    throw Error(ErrorCode::kInvalidArgument, "case", "family and source_id must not be empty");
  if (m.family.find('/') != std::string::npos)  // the case id's family is everything before the first '/'
    throw Error(ErrorCode::kInvalidArgument, "case", fmt::format("family '{}' contains '/'", m.family));
  if (m.split != "profiling" && m.split != "evaluation")
    throw Error(ErrorCode::kInvalidArgument, "case",
                fmt::format("split '{}' is not 'profiling' or 'evaluation'", m.split));
  ProfileRecord r;
  r.case_id = fmt::format("{}/{}/{}{}", m.family, m.source_id, m.index, whole_request ? std::string(kWholeRequestSuffix) : std::string());
  r.source = m.source_id;
  r.request = fmt::format("{}#{}", m.source_id, m.chunk);
  r.split = m.split == "profiling" ? "profile" : "eval";
  r.key = fmt::format("{}.bf16.d128.q{}.kv{}", arch, m.block_q, m.block_kv);
  return r;
}

namespace {
namespace fs = std::filesystem;

/// The files `path` stands for: itself, or a directory's *.safetensors files sorted by name.
std::vector<std::string> expand(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return {path};  // read_mask_file says what is wrong with a missing path
  std::vector<std::string> files;
  for (const fs::directory_entry& e : fs::directory_iterator(path, ec))
    if (e.path().extension() == ".safetensors" && e.is_regular_file(ec)) files.push_back(e.path().string());
  if (ec) throw Error(ErrorCode::kIoError, path, fmt::format("cannot list the directory: {}", ec.message()));
  if (files.empty())
    throw Error(ErrorCode::kInvalidArgument, "--masks", fmt::format("directory '{}' holds no .safetensors file", path));
  std::sort(files.begin(), files.end());
  return files;
}

/// One spelling per file, so "a.safetensors" and "./a.safetensors" are the same input.
std::string canonical(const std::string& path) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(path, ec);
  return ec ? path : p.string();
}
}  // namespace

std::vector<MaskFileInput> list_mask_files(const std::vector<std::string>& paths,
                                           const std::vector<std::string>& splits) {
  if (paths.empty()) throw Error(ErrorCode::kInvalidArgument, "--masks", "no mask file or directory given");
  std::set<std::string> seen_paths;
  std::map<std::string, std::string> case_files;  // case id -> file
  std::vector<MaskFileInput> out;
  int all = 0;
  for (const std::string& given : paths) {
    if (given.empty()) throw Error(ErrorCode::kInvalidArgument, "--masks", "an empty path");
    if (!seen_paths.insert(canonical(given)).second)
      throw Error(ErrorCode::kInvalidArgument, "--masks", fmt::format("'{}' is given more than once", given));
    for (const std::string& file : expand(given)) {
      if (file != given && !seen_paths.insert(canonical(file)).second)
        throw Error(ErrorCode::kInvalidArgument, "--masks", fmt::format("'{}' is given more than once", file));
      MaskFileInput in;
      in.path = file;
      try {
        in.meta = read_mask_file(file).meta;
      } catch (const Error& e) {  // a missing or unreadable file: name the option too, as other CLI inputs do
        if (e.code() != ErrorCode::kIoError) throw;
        throw Error(ErrorCode::kIoError, "--masks", fmt::format("'{}': {}", file, e.message()));
      }
      // A geometry the runtime refuses would stop the profile at this file, after the files before it: refused now.
      for (const auto& [field, b] : {std::pair<const char*, int>{"block_q", in.meta.block_q}, {"block_kv", in.meta.block_kv}})
        if (!is_block_size(b))
          throw Error(ErrorCode::kFormatError, file,
                      fmt::format("metadata '{}' = {}: attention blocks are multiples of 16 tokens in [{}, {}]", field,
                                  b, kMinBlockSize, kMaxBlockSize));
      try {
        in.case_id = case_record_fields(in.meta, "sm90a").case_id;
      } catch (const Error& e) {
        throw Error(ErrorCode::kFormatError, file, e.message());
      }
      const auto [it, fresh] = case_files.emplace(in.case_id, file);
      if (!fresh)
        throw Error(ErrorCode::kInvalidArgument, "--masks",
                    fmt::format("'{}' and '{}' hold the same case {} (family, source_id and index must tell cases "
                                "apart)", it->second, file, in.case_id));
      ++all;
      if (std::find(splits.begin(), splits.end(), in.meta.split) != splits.end()) out.push_back(std::move(in));
    }
  }
  if (out.empty())
    throw Error(ErrorCode::kInvalidArgument, "--masks",
                fmt::format("none of the {} mask files is in the splits given (--splits)", all));
  return out;
}

namespace {

/// `s` without leading and trailing whitespace.
std::string trimmed(const std::string& s) {
  const char* ws = " \t\r\n\f\v";
  const std::size_t a = s.find_first_not_of(ws);
  return a == std::string::npos ? std::string() : s.substr(a, s.find_last_not_of(ws) - a + 1);
}

/// The case `id` (one line of a --case-ids file) names, checked against the corpus; throws Error(kInvalidArgument,
/// "--case-ids", why) without the "<path>:<line>: " prefix, which the caller adds.
CaseIdInput case_of_id(const std::string& id, const CorpusOptions& opt) {
  auto bad = [](const std::string& why) { return Error(ErrorCode::kInvalidArgument, "--case-ids", why); };
  ProfileCaseId cid;
  try {
    cid = parse_profile_case_id(id);
    family_spec(cid.family);  // "unknown family 'X' (families: ...)"
  } catch (const Error& e) {
    throw bad(e.argument() == "case" ? e.message() : fmt::format("case id '{}': {}", id, e.message()));
  }
  const int count = case_count(cid.family, opt);
  if (cid.index < 0 || cid.index >= count)
    throw bad(fmt::format("case id '{}': index {} is out of range: family {} has {} cases (0 to {}){}", id, cid.index,
                          cid.family, count, count - 1, opt.small ? " in the small corpus" : ""));
  const std::string& source = case_origin(cid.family, cid.index, opt).source_id;
  if (source != cid.source)
    throw bad(fmt::format("case id '{}': case {} of family {} is of source '{}', not '{}'", id, cid.index, cid.family,
                          source, cid.source));
  // parse_profile_case_id accepts canonical ids only and the source is the case's: `id` is already the id that
  // case_record_fields writes.
  return {cid.family, cid.index, cid.whole_request, id};
}
}  // namespace

std::vector<CaseIdInput> read_case_ids(const std::string& path, const CorpusOptions& opt) {
  std::error_code ec;
  const bool directory = fs::is_directory(path, ec);  // opens, but cannot be read
  std::ifstream in;
  errno = 0;
  if (!directory) in.open(path);
  if (!in.is_open())
    throw Error(ErrorCode::kIoError, "--case-ids",
                fmt::format("{}: cannot be read ({})", path,
                            directory ? "a directory" : errno ? std::strerror(errno) : "cannot open it"));
  std::vector<CaseIdInput> out;
  std::map<std::string, int> line_of;  // case id -> the line that names it
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string id = trimmed(line);
    if (id.empty() || id[0] == '#') continue;
    try {
      out.push_back(case_of_id(id, opt));
    } catch (const Error& e) {
      throw Error(e.code(), "--case-ids", fmt::format("{}:{}: {}", path, n, e.message()));
    }
    const auto [it, fresh] = line_of.emplace(out.back().case_id, n);
    if (!fresh)
      throw Error(ErrorCode::kInvalidArgument, "--case-ids",
                  fmt::format("{}:{}: case id '{}' is given twice (lines {} and {})", path, n, id, it->second, n));
  }
  if (in.bad()) throw Error(ErrorCode::kIoError, "--case-ids", fmt::format("{}: cannot be read (a read error)", path));
  if (out.empty())
    throw Error(ErrorCode::kInvalidArgument, "--case-ids",
                fmt::format("{}: no case id (one '<family>/<source>/<index>' or '.../whole' a line; blank lines and "
                            "lines starting with '#' are skipped)", path));
  return out;
}

}  // namespace tessera::corpus
