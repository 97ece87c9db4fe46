// libFuzzer target: the profile-record reader (src/core/profile_file.cpp: read_profile_records, resume_profile_file;
// src/core/table_compiler.cpp: profile_record_from_json). Each input is read three ways: as the file's bytes (plain
// text, or gzip when it starts with gzip's magic), gzip-compressed whole, and gzip-compressed then truncated at a
// point derived from the input (a copy cut short by a time limit or a failed download). Each read either returns
// records or throws tessera::Error naming "--in" (resume: "--out"); a parsed line round-trips through
// profile_record_to_json.
#include <string>
#include <vector>
#include <zlib.h>

#include "core/profile_file.hpp"
#include "core/table_compiler.hpp"
#include "fuzz_common.hpp"

namespace {

std::vector<std::uint8_t> gzip(const std::uint8_t* data, std::size_t size) {
  z_stream zs{};
  if (deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) tessera::fuzz::fail("deflateInit2");
  std::vector<std::uint8_t> out(deflateBound(&zs, static_cast<uLong>(size)) + 32);
  zs.next_in = const_cast<Bytef*>(data);
  zs.avail_in = static_cast<uInt>(size);
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) tessera::fuzz::fail("deflate");
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

void read_file(const std::string& path, const char* what) {
  for (int with_present = 0; with_present < 2; ++with_present) {
    std::vector<tessera::FeaturePresence> present;
    try {
      const auto records = tessera::read_profile_records(path, "sm90a", with_present ? &present : nullptr);
      if (records.empty()) tessera::fuzz::fail("read_profile_records returned no record without an error:", what);
    } catch (const tessera::Error& e) {
      tessera::fuzz::check_error(e);
      if (e.argument() != "--in") tessera::fuzz::fail("read error names another argument:", e.what());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > (1 << 20)) return 0;
  const std::string& path = tessera::fuzz::scratch_path(".jsonl");
  // 1. The bytes as they are.
  tessera::fuzz::write_scratch(path, data, size);
  read_file(path, "raw");
  // 2. One line on its own, strict and lenient, and its round trip.
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string line = text.substr(0, text.find('\n'));
  for (int with_present = 0; with_present < 2; ++with_present) {
    tessera::FeaturePresence present{};
    try {
      const tessera::ProfileRecord r = tessera::profile_record_from_json(line, with_present ? &present : nullptr);
      const std::string js = tessera::profile_record_to_json(r);
      tessera::FeaturePresence p2{};
      const tessera::ProfileRecord r2 = tessera::profile_record_from_json(js, with_present ? &p2 : nullptr);
      if (tessera::profile_record_to_json(r2) != js) tessera::fuzz::fail("record round trip differs:", js);
    } catch (const tessera::Error& e) {
      tessera::fuzz::check_error(e);
      if (e.argument() != "profile") tessera::fuzz::fail("record error names another argument:", e.what());
    }
  }
  // 3. gzip, whole and truncated.
  const std::vector<std::uint8_t> gz = gzip(data, size);
  tessera::fuzz::write_scratch(path, gz.data(), gz.size());
  read_file(path, "gzip");
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 1099511628211ull;
  const std::size_t cut = gz.empty() ? 0 : static_cast<std::size_t>(h % gz.size());
  tessera::fuzz::write_scratch(path, gz.data(), cut);
  read_file(path, "truncated gzip");
  // 4. Resuming a plain file (it may rewrite it: a partial last line is dropped).
  tessera::fuzz::write_scratch(path, data, size);
  try {
    int repaired = 0;
    (void)tessera::resume_profile_file(path, &repaired);
    if (repaired < 0) tessera::fuzz::fail("negative repair count");
  } catch (const tessera::Error& e) {
    tessera::fuzz::check_error(e);
    if (e.argument() != "--out") tessera::fuzz::fail("resume error names another argument:", e.what());
  }
  return 0;
}
