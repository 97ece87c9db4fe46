#pragma once
// Shared helpers of the libFuzzer targets (tests/fuzz/README.md). Each target file defines LLVMFuzzerTestOneInput;
// in the CUDA build (no libFuzzer) the same files are linked with replay_main.cpp, which runs them on the committed
// seeds and regression inputs (CTest fuzz_replay_<target>).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

#include "tessera/error.hpp"

namespace tessera::fuzz {

/// A finding: prints what broke and aborts (libFuzzer and the replay driver both report an abort as a crash).
[[noreturn]] inline void fail(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "fuzz finding: %s %s\n", what, detail.c_str());
  std::abort();
}

/// Checks that a tessera::Error names an argument and says something (the contract of every input check).
inline void check_error(const tessera::Error& e) {
  if (e.argument().empty()) fail("tessera::Error without an argument:", e.what());
  if (std::string(e.what()).empty()) fail("tessera::Error without a message");
}

/// A per-process scratch file for readers that take a path (/dev/shm when present: no disk I/O per input).
inline const std::string& scratch_path(const char* suffix) {
  static const std::string path = [&] {
    const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    return std::string(dir) + "/tessera_fuzz_" + std::to_string(getpid()) + suffix;
  }();
  return path;
}

inline void write_scratch(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) fail("cannot write scratch file", path);
}

}  // namespace tessera::fuzz
