// Writing a tool's output file, checked: every `tessera` command that writes a file goes through here, so a bad
// path is an error (exit non-zero) instead of a silent "wrote ..." with no file, and a path that cannot be written is
// refused before the long computation that would produce its contents.
#pragma once

#include <fmt/core.h>
#include <unistd.h>

#ifdef __linux__
#include <sys/vfs.h>
#endif

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "tessera/error.hpp"

namespace tessera::tools {

namespace detail {

/// The name of the kernel pseudo filesystem `path` lies on ("proc", "sysfs"), or empty for any other filesystem:
/// their files accept open() from root but are kernel interfaces, never a place for a tool's output.
inline std::string pseudo_filesystem(const std::filesystem::path& path) {
#ifdef __linux__
  struct statfs s{};
  if (::statfs(path.c_str(), &s) != 0) return {};
  switch (static_cast<unsigned long>(s.f_type)) {
    case 0x9fa0UL: return "proc";       // PROC_SUPER_MAGIC
    case 0x62656572UL: return "sysfs";  // SYSFS_MAGIC
    default: return {};
  }
#else
  (void)path;
  return {};
#endif
}

/// Throws Error(kIoError, option) naming `path` unless `dir` (an existing directory that would hold `path`) lets
/// this process create entries: write and search permission, and not a kernel pseudo filesystem.
inline void check_writable_dir(const std::filesystem::path& dir, const std::string& path, const char* option) {
  if (const std::string fs = pseudo_filesystem(dir); !fs.empty())
    throw Error(ErrorCode::kIoError, option,
                fmt::format("cannot write '{}': directory '{}' is on the kernel's {} filesystem", path, dir.string(),
                            fs));
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(ErrorCode::kIoError, option,
                fmt::format("cannot write '{}': directory '{}': {}", path, dir.string(), std::strerror(errno)));
}

}  // namespace detail

/// Throws Error(kIoError, option) unless `path` names a file this process can write, checked before long runs so a
/// typo or an unwritable output path fails at once: not empty; an existing `path` must be a regular file (not a
/// directory, device such as /dev/full, FIFO or socket), writable, and not on a kernel pseudo filesystem (/proc,
/// /sys); a new `path` needs an existing, writable parent directory (not on /proc or /sys). `option` is the
/// command-line option that named the path, e.g. "--json". Permission checks use access(2), so they reflect the
/// process's real user (root passes them where its capabilities allow).
inline void check_output_dir(const std::string& path, const char* option) {
  namespace fs = std::filesystem;
  if (path.empty()) throw Error(ErrorCode::kIoError, option, "the output path is empty");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_directory(st))
    throw Error(ErrorCode::kIoError, option, fmt::format("cannot write '{}': it is a directory", path));
  if (fs::exists(st)) {
    if (!fs::is_regular_file(st))
      throw Error(ErrorCode::kIoError, option,
                  fmt::format("cannot write '{}': it is not a regular file (a device, FIFO or socket)", path));
    if (const std::string pfs = detail::pseudo_filesystem(path); !pfs.empty())
      throw Error(ErrorCode::kIoError, option,
                  fmt::format("cannot write '{}': it is a file of the kernel's {} filesystem", path, pfs));
    if (::access(path.c_str(), W_OK) != 0)
      throw Error(ErrorCode::kIoError, option, fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
    return;
  }
  const fs::path given_parent = fs::path(path).parent_path();
  const fs::path parent = given_parent.empty() ? fs::path(".") : given_parent;
  if (fs::exists(parent, ec) && !fs::is_directory(parent, ec))
    throw Error(ErrorCode::kIoError, option,
                fmt::format("cannot write '{}': '{}' is not a directory", path, parent.string()));
  if (!fs::is_directory(parent, ec))
    throw Error(ErrorCode::kIoError, option,
                fmt::format("cannot write '{}': directory '{}' does not exist", path, parent.string()));
  detail::check_writable_dir(parent, path, option);
}

/// Throws Error(kIoError, option) unless `dir` can become an output directory: an existing `dir` must be a writable
/// directory, and for a new one its nearest existing ancestor (where it would be created) must be a writable
/// directory; none may be on /proc or /sys. Whether an existing `dir` may be written into (e.g. must be empty) is the
/// caller's rule.
inline void check_output_directory(const std::string& dir, const char* option) {
  namespace fs = std::filesystem;
  if (dir.empty()) throw Error(ErrorCode::kIoError, option, "the output directory path is empty");
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  if (ec) p = dir;
  while (!fs::exists(p, ec) && p.has_relative_path()) p = p.parent_path();
  if (!fs::is_directory(p, ec))
    throw Error(ErrorCode::kIoError, option,
                fmt::format("cannot create '{}': '{}' exists and is not a directory", dir, p.string()));
  detail::check_writable_dir(p, dir, option);
}

/// Throws Error(kInvalidArgument, out_option) when the output `out` is the same file as the input `in` (so the
/// output would overwrite its own input, e.g. the profile records a table is compiled from).
inline void check_not_input(const std::string& out, const std::string& in, const char* out_option,
                            const char* in_option) {
  std::error_code ec;
  if (std::filesystem::exists(out, ec) && std::filesystem::equivalent(out, in, ec))
    throw Error(ErrorCode::kInvalidArgument, out_option,
                fmt::format("'{}' is the {} file: writing it would overwrite the input", out, in_option));
}

/// Throws Error(kInvalidArgument, b_option) when two outputs of one command, `a` and `b`, name the same file (one
/// would overwrite the other). Works before either exists: the paths are compared after
/// std::filesystem::weakly_canonical (".", "..", symbolic links of the existing part resolved), and existing files by
/// identity (hard links).
inline void check_distinct_outputs(const std::string& a, const std::string& b, const char* a_option,
                                   const char* b_option) {
  namespace fs = std::filesystem;
  std::error_code ec, ec2;
  const fs::path ca = fs::weakly_canonical(fs::absolute(a, ec), ec);
  const fs::path cb = fs::weakly_canonical(fs::absolute(b, ec2), ec2);
  const bool same = (!ec && !ec2 && ca == cb) || a == b ||
                    (fs::exists(a, ec) && fs::exists(b, ec2) && fs::equivalent(a, b, ec));
  if (same)
    throw Error(ErrorCode::kInvalidArgument, b_option,
                fmt::format("'{}' is also the {} file: the two outputs must be different files", b, a_option));
}

/// Checks a command's second output `extra` (option `extra_option`, e.g. a report beside the main output `out`)
/// before anything is read or written: a writable path (check_output_dir: an empty path is an error too), not the
/// input file `in`, and not the same file as `out`.
inline void check_extra_output(const std::string& extra, const char* extra_option, const std::string& out,
                               const char* out_option, const std::string& in, const char* in_option) {
  check_output_dir(extra, extra_option);
  check_not_input(extra, in, extra_option, in_option);
  check_distinct_outputs(out, extra, out_option, extra_option);
}

/// Writes `text` to `path`, replacing it only once the whole text is written: into a temporary file beside it
/// (".<name>.tessera-tmp-<pid>" in the same directory), flushed and closed, then renamed over `path`, so a failed write
/// (a full disk, a file-size limit) leaves an existing `path` as it was and no partial file behind. `path` is a
/// regular file or new (check_output_dir refuses anything else); an existing `path` with other hard links is replaced
/// by a new file (the other names keep the old contents). Throws Error(kIoError, option, "cannot write '<path>':
/// <reason>") when the file cannot be created, written, closed or renamed.
inline void write_text_file(const std::string& path, std::string_view text, const char* option) {
  namespace fs = std::filesystem;
  check_output_dir(path, option);
  const fs::path target(path);
  const fs::path tmp =
      target.parent_path() / fmt::format(".{}.tessera-tmp-{}", target.filename().string(), static_cast<long>(::getpid()));
  const auto fail = [&](const std::string& why) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw Error(ErrorCode::kIoError, option, fmt::format("cannot write '{}': {}", path, why));
  };
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(std::strerror(errno));
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();
    if (!out) fail("the write failed (disk full or a file-size limit?); the existing file is unchanged");
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) fail(ec.message());
}

}  // namespace tessera::tools
