// Writing a tool's output file, checked: every `tessera` command that writes a file goes through here, so a bad
// path is an error (exit non-zero) instead of a silent "wrote ..." with no file.
#pragma once

#include <fmt/core.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "tessera/error.hpp"

namespace tessera::tools {

/// Throws Error(kIoError, option) unless `path` is a file name whose parent directory exists and which is not itself
/// a directory (checked before long runs, so a typo in an output path fails at once). `option` is the command-line
/// option that named the path, e.g. "--json".
inline void check_output_dir(const std::string& path, const char* option) {
  if (path.empty()) throw Error(ErrorCode::kIoError, option, "the output path is empty");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(ErrorCode::kIoError, option, fmt::format("cannot write '{}': it is a directory", path));
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent, ec))
    throw Error(ErrorCode::kIoError, option,
                fmt::format("cannot write '{}': directory '{}' does not exist", path, parent.string()));
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

/// Writes `text` to `path` (truncating). Throws Error(kIoError, option, "cannot write '<path>': <reason>") when the
/// file cannot be opened, written or closed.
inline void write_text_file(const std::string& path, std::string_view text, const char* option) {
  check_output_dir(path, option);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(ErrorCode::kIoError, option, fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) throw Error(ErrorCode::kIoError, option, fmt::format("write to '{}' failed", path));
}

}  // namespace tessera::tools
