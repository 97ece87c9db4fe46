#include "core/profile_file.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <zlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/profile_record_check.hpp"
#include "tessera/error.hpp"

namespace tessera {

namespace {

[[noreturn]] void io_error(const std::string& path, const std::string& what) {
  throw Error(ErrorCode::kIoError, "--out", fmt::format("{} '{}': {}", what, path, std::strerror(errno)));
}

}  // namespace

std::set<std::string> resume_profile_file(const std::string& path, int* repaired) {
  if (repaired) *repaired = 0;
  std::set<std::string> done;
  std::ifstream in(path, std::ios::binary);
  if (!in) return done;  // nothing profiled yet
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::vector<std::string> lines;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    lines.push_back(text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos));
    pos = nl == std::string::npos ? text.size() : nl + 1;
  }
  const bool torn = !text.empty() && text.back() != '\n';
  // Every cut of a record line starts with its '{': a last line without one is not a record cut off by a stop, and
  // the file is not a records file (an ids or mask file given as --out): it is never rewritten.
  if (torn && lines.back().front() != '{')
    throw Error(ErrorCode::kFormatError, "--out",
                fmt::format("{} line {}: not a profile record (the file is not one `tessera profile` wrote; it is left "
                            "as it is: give another --out)",
                            path, lines.size()));
  if (torn) lines.pop_back();
  std::vector<std::string> case_of(lines.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    try {
      case_of[i] = profile_record_from_json(lines[i]).case_id;
    } catch (const Error& e) {
      throw Error(ErrorCode::kFormatError, "--out", fmt::format("{} line {}: {}", path, i + 1, e.message()));
    }
  }
  if (torn) {
    std::string last;
    for (std::size_t i = lines.size(); i-- > 0;)
      if (!case_of[i].empty()) {
        last = case_of[i];
        break;
      }
    std::string kept;
    int removed = 1;  // the partial line
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (!last.empty() && case_of[i] == last) {
        ++removed;
        continue;
      }
      kept += lines[i] + "\n";
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!(out << kept) || !out.flush()) io_error(path, "cannot rewrite");
    if (repaired) *repaired = removed;
    for (std::size_t i = 0; i < lines.size(); ++i)
      if (case_of[i] != last && !case_of[i].empty()) done.insert(case_of[i]);
    return done;
  }
  for (const std::string& c : case_of)
    if (!c.empty()) done.insert(c);
  return done;
}

void append_case_records(const std::string& path, const std::vector<ProfileRecord>& records) {
  std::string block;
  for (const ProfileRecord& r : records) block += profile_record_to_json(r) + "\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) io_error(path, "cannot append to");
  std::size_t off = 0;
  while (off < block.size()) {
    const ssize_t n = ::write(fd, block.data() + off, block.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      io_error(path, "cannot append to");
    }
    off += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) io_error(path, "cannot close");
}

std::vector<ProfileRecord> read_profile_records(const std::string& path, std::string_view arch,
                                                std::vector<FeaturePresence>* present, bool need_profiling) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(ErrorCode::kIoError, "--in", "'" + path + "' is a directory, not a profile file");
  // zlib's gz reader: gzip files (the committed *.jsonl.gz record sets) are decompressed, other files read as they are.
  gzFile gz = gzopen(path.c_str(), "rb");
  if (gz == nullptr) throw Error(ErrorCode::kIoError, "--in", "cannot read '" + path + "'");
  std::string text;
  char buf[1 << 16];
  int got = 0;
  while ((got = gzread(gz, buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(got));
  // gzread returns 0 both at the end and where a gzip stream is cut off; gzerror tells them apart (Z_BUF_ERROR: the
  // input ended inside a stream), so a truncated .gz is an error, not a shorter record set.
  int zerr = Z_OK;
  const std::string gz_message = gzerror(gz, &zerr);
  gzclose(gz);
  if (got < 0 || zerr != Z_OK)
    throw Error(ErrorCode::kIoError, "--in",
                fmt::format("cannot read '{}': {}", path,
                            zerr == Z_BUF_ERROR ? "the gzip data ends early (a truncated file)" : gz_message));
  std::istringstream in(text);
  std::vector<ProfileRecord> records;
  if (present) present->clear();
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines, as the bench scripts skip
    try {
      FeaturePresence p{};
      records.push_back(profile_record_from_json(line, present ? &p : nullptr));
      if (present) present->push_back(p);
      check_profile_record(records.back(), arch);
    } catch (const Error& e) {
      throw Error(ErrorCode::kFormatError, "--in", fmt::format("{} line {}: {}", path, line_no, e.message()));
    }
  }
  if (records.empty()) throw Error(ErrorCode::kFormatError, "--in", fmt::format("{} holds no profile record", path));
  try {
    check_profile_record_set(records, present, need_profiling);
  } catch (const Error& e) {
    throw Error(ErrorCode::kFormatError, "--in", fmt::format("{} (non-empty lines counted): {}", path, e.message()));
  }
  return records;
}

}  // namespace tessera
