#include "tessera_corpus/profile_inputs.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string_view>
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

bool is_mask_file(const fs::directory_entry& e, std::error_code& ec) {
  return e.path().extension() == ".safetensors" && e.is_regular_file(ec);
}

/// The first directory below `dir` (depth first, by name; symbolic links not followed) holding a .safetensors file,
/// or "" when there is none or `budget` directory entries are read before one is found: the hint of a --masks
/// directory whose files are all in subdirectories.
std::string first_subdirectory_with_masks(const fs::path& dir, int& budget) {
  std::error_code ec;
  std::vector<fs::path> subdirs;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (--budget < 0) return "";
    if (e.is_directory(ec) && !e.is_symlink(ec)) subdirs.push_back(e.path());
  }
  std::sort(subdirs.begin(), subdirs.end());
  for (const fs::path& sub : subdirs) {
    for (const fs::directory_entry& e : fs::directory_iterator(sub, ec))
      if (is_mask_file(e, ec)) return sub.string();
    const std::string below = first_subdirectory_with_masks(sub, budget);
    if (!below.empty() || budget < 0) return below;
  }
  return "";
}

/// The files `path` stands for: itself, or a directory's *.safetensors files sorted by name.
std::vector<std::string> expand(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return {path};  // read_mask_file says what is wrong with a missing path
  std::vector<std::string> files;
  for (const fs::directory_entry& e : fs::directory_iterator(path, ec))
    if (is_mask_file(e, ec)) files.push_back(e.path().string());
  if (ec) throw Error(ErrorCode::kIoError, path, fmt::format("cannot list the directory: {}", ec.message()));
  if (files.empty()) {
    int budget = 100000;  // directory entries read for the hint at most
    const std::string sub = first_subdirectory_with_masks(path, budget);
    throw Error(ErrorCode::kInvalidArgument, "--masks",
                sub.empty() ? fmt::format("directory '{}' holds no .safetensors file", path)
                            : fmt::format("directory '{}' holds no .safetensors file; its subdirectories are not "
                                          "searched (not recursive), and '{}' holds some: give such directories as "
                                          "--masks paths",
                                          path, sub));
  }
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
                all == 1 ? std::string("the 1 mask file is not in the splits given (--splits)")
                         : fmt::format("none of the {} mask files is in the splits given (--splits)", all));
  return out;
}

namespace {

/// `s` without leading and trailing whitespace.
std::string trimmed(const std::string& s) {
  const char* ws = " \t\r\n\f\v";
  const std::size_t a = s.find_first_not_of(ws);
  return a == std::string::npos ? std::string() : s.substr(a, s.find_last_not_of(ws) - a + 1);
}

/// `s` (a line of a --case-ids file, or part of one) in single quotes for an error message: bytes other than
/// printable ASCII as \xNN, '\' as "\\", and cut after ~80 characters ("..." and the length in bytes follow), so
/// that a control byte or a huge line (not a case-ids file at all) stays readable.
std::string quoted_id(std::string_view s) {
  constexpr std::size_t kMaxChars = 80;
  std::string q = "'";
  std::size_t i = 0;
  for (; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::string piece =
        c == '\\' ? std::string("\\\\") : c < 0x20 || c >= 0x7f ? fmt::format("\\x{:02x}", c) : std::string(1, char(c));
    if (q.size() - 1 + piece.size() > kMaxChars) break;
    q += piece;
  }
  return i == s.size() ? q + "'" : fmt::format("{}...' ({} bytes)", q, s.size());
}

/// `message` (parse_profile_case_id's or family_spec's, which quote their input as it is) with `id` and the parts of
/// it they quote (family, index) quoted by quoted_id() instead.
std::string requoted(std::string message, std::string_view id) {
  std::string_view rest = id;
  if (rest.ends_with(kWholeRequestSuffix)) rest.remove_suffix(kWholeRequestSuffix.size());
  for (const std::string_view part : {id, rest.substr(0, rest.find('/')), rest.substr(rest.rfind('/') + 1)}) {
    const std::string raw = fmt::format("'{}'", part), q = quoted_id(part);
    if (q == raw) continue;
    for (std::size_t at = 0; (at = message.find(raw, at)) != std::string::npos; at += q.size())
      message.replace(at, raw.size(), q);
  }
  return message;
}

/// The case `id` (one line of a --case-ids file, trimmed) names, checked against the corpus; throws
/// Error(kInvalidArgument, "--case-ids", why) without the "<path>:<line>: " prefix, which the caller adds.
CaseIdInput case_of_id(const std::string& id, const CorpusOptions& opt) {
  auto bad = [](const std::string& why) { return Error(ErrorCode::kInvalidArgument, "--case-ids", why); };
  // The line's shape first: a trailing comment, several ids on a line, bytes no case id holds.
  if (id.find('#') != std::string::npos)
    throw bad(fmt::format("case id {} holds '#': '#' starts a comment only at the start of a line, not after an id",
                          quoted_id(id)));
  if (const std::size_t at = id.find_first_of(", \t\f\v\r"); at != std::string::npos)
    throw bad(fmt::format("case id {} holds {}: one case id per line", quoted_id(id),
                          id[at] == ',' ? "','" : "whitespace"));
  for (const char ch : id)
    if (const auto c = static_cast<unsigned char>(ch); c < 0x20 || c >= 0x7f)
      throw bad(fmt::format("case id {} holds the byte \\x{:02x}: case ids are printable ASCII", quoted_id(id), c));
  ProfileCaseId cid;
  try {
    cid = parse_profile_case_id(id);
    family_spec(cid.family);  // "unknown family 'X' (families: ...)"
  } catch (const Error& e) {
    throw bad(requoted(e.argument() == "case" ? e.message() : fmt::format("case id '{}': {}", id, e.message()), id));
  }
  const int count = case_count(cid.family, opt);
  if (cid.index < 0 || cid.index >= count)
    throw bad(fmt::format("case id {}: index {} is out of range: family {} has {} cases (0 to {}){}", quoted_id(id),
                          cid.index, cid.family, count, count - 1, opt.small ? " in the small corpus" : ""));
  const std::string& source = case_origin(cid.family, cid.index, opt).source_id;
  if (source != cid.source)
    throw bad(fmt::format("case id {}: case {} of family {} is of source '{}', not {}", quoted_id(id), cid.index,
                          cid.family, source, quoted_id(cid.source)));
  // parse_profile_case_id accepts canonical ids only and the source is the case's: `id` is already the id that
  // case_record_fields writes.
  return {cid.family, cid.index, cid.whole_request, id};
}
}  // namespace

std::vector<CaseIdInput> read_case_ids(const std::string& path, const CorpusOptions& opt) {
  if (path.empty()) throw Error(ErrorCode::kInvalidArgument, "--case-ids", "empty path");
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
    if (n == 1 && line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);  // a UTF-8 byte-order mark (editors write one)
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
                  fmt::format("{}:{}: case id {} is given twice (lines {} and {})", path, n, quoted_id(id), it->second,
                              n));
  }
  if (in.bad()) throw Error(ErrorCode::kIoError, "--case-ids", fmt::format("{}: cannot be read (a read error)", path));
  if (out.empty())
    throw Error(ErrorCode::kInvalidArgument, "--case-ids",
                fmt::format("{}: no case id (one '<family>/<source>/<index>' or '.../whole' a line; blank lines and "
                            "lines starting with '#' are skipped)", path));
  return out;
}

}  // namespace tessera::corpus
