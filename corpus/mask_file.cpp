#include "tessera_corpus/mask_file.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "tessera/error.hpp"
#include "tessera_corpus/packed_mask.hpp"

namespace tessera::corpus {

namespace {
constexpr const char* kFormat = "tessera-mask-v1";
constexpr const char* kBitOrder = "numpy.packbits(dense, axis=-1), big-endian bits, rows padded to whole bytes";

[[noreturn]] void bad(const std::string& what) { throw Error(ErrorCode::kFormatError, "mask file", what); }

std::string meta_str(const nlohmann::json& md, const char* key) {
  if (!md.contains(key) || !md[key].is_string()) bad(fmt::format("metadata '{}' missing or not a string", key));
  return md[key].get<std::string>();
}
// A metadata integer, parsed strictly: the whole string is one decimal integer (no sign for unsigned types, no
// blanks) in [lo, hi].
template <class T>
T meta_int(const nlohmann::json& md, const char* key, T lo, T hi) {
  const std::string s = meta_str(md, key);
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty() || v < lo || v > hi)
    bad(fmt::format("metadata '{}' = '{}' is not an integer in [{}, {}]", key, s, lo, hi));
  return v;
}
std::int64_t meta_extent(const nlohmann::json& md, const char* key) {
  return meta_int<std::int64_t>(md, key, 0, std::numeric_limits<std::int64_t>::max());
}
int meta_small(const nlohmann::json& md, const char* key, int lo) {
  return meta_int<int>(md, key, lo, std::numeric_limits<int>::max());
}
// An array of `n` non-negative JSON integers (tensor 'mask' field `key`).
std::vector<std::uint64_t> tensor_ints(const nlohmann::json& t, const char* key, std::size_t n) {
  if (!t.contains(key) || !t[key].is_array() || t[key].size() != n)
    bad(fmt::format("tensor 'mask' field '{}' missing or not an array of {} integers", key, n));
  std::vector<std::uint64_t> v;
  for (const auto& e : t[key]) {
    if (!e.is_number_unsigned())
      bad(fmt::format("tensor 'mask' field '{}' holds {} (not a non-negative integer)", key, e.dump()));
    v.push_back(e.get<std::uint64_t>());
  }
  return v;
}
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0); }
}  // namespace

std::vector<std::uint8_t> encode_mask_file(const Case& c) {
  const PackedMask& k = c.mask;
  const CaseMeta& m = c.meta;
  if (m.heads != k.heads || (m.n_q + m.block_q - 1) / m.block_q != k.n_qb || (m.n_kv + m.block_kv - 1) / m.block_kv != k.n_kvb)
    throw Error(ErrorCode::kInvalidArgument, "case", "metadata extents disagree with the mask");
  nlohmann::json md = {
      {"format", kFormat}, {"bit_order", kBitOrder}, {"family", m.family}, {"source_id", m.source_id},
      {"model", m.model}, {"sparsifier", m.sparsifier}, {"kind", m.kind}, {"token_order", m.token_order},
      {"split", m.split}, {"head_ids", m.head_ids}, {"notes", m.notes},
      {"n_q", std::to_string(m.n_q)}, {"n_kv", std::to_string(m.n_kv)}, {"tokens_real", std::to_string(m.tokens_real)},
      {"block_q", std::to_string(m.block_q)}, {"block_kv", std::to_string(m.block_kv)},
      {"n_qb", std::to_string(k.n_qb)}, {"n_kvb", std::to_string(k.n_kvb)}, {"heads", std::to_string(m.heads)},
      {"step", std::to_string(m.step)}, {"layer", std::to_string(m.layer)}, {"chunk", std::to_string(m.chunk)},
      {"index", std::to_string(m.index)}, {"seed", std::to_string(m.seed)}};
  nlohmann::json header = {{"__metadata__", md},
                           {"mask", {{"dtype", "U8"}, {"shape", {1, k.heads, k.n_qb, k.row_bytes}},
                                     {"data_offsets", {0, k.bits.size()}}}}};
  std::string h = header.dump();
  while (h.size() % 8) h.push_back(' ');
  std::vector<std::uint8_t> out(8 + h.size() + k.bits.size());
  std::uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[std::size_t(i)] = std::uint8_t(n >> (8 * i));
  std::memcpy(out.data() + 8, h.data(), h.size());
  if (!k.bits.empty()) std::memcpy(out.data() + 8 + h.size(), k.bits.data(), k.bits.size());
  return out;
}

Case decode_mask_file(const std::vector<std::uint8_t>& b) {
  if (b.size() < 8) bad("shorter than the 8-byte header length");
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t(b[std::size_t(i)]) << (8 * i);
  if (n > b.size() - 8) bad(fmt::format("header length {} exceeds the file", n));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(b.begin() + 8, b.begin() + 8 + std::int64_t(n));
  } catch (const nlohmann::json::exception& e) {
    bad(fmt::format("header is not valid JSON: {}", e.what()));
  }
  if (!header.is_object()) bad("header is not a JSON object");
  if (!header.contains("__metadata__") || !header["__metadata__"].is_object()) bad("no __metadata__");
  const auto& md = header["__metadata__"];
  if (meta_str(md, "format") != kFormat) bad("format is not " + std::string(kFormat));
  if (!header.contains("mask")) bad("no tensor 'mask'");
  const auto& t = header["mask"];
  if (!t.is_object()) bad(fmt::format("tensor 'mask' is {} (not an object)", t.type_name()));
  if (!t.contains("dtype") || t["dtype"] != "U8") bad("tensor 'mask' field 'dtype' is not \"U8\"");
  const auto shape = tensor_ints(t, "shape", 4);
  const auto offs = tensor_ints(t, "data_offsets", 2);
  const std::int64_t heads = meta_int<std::int64_t>(md, "heads", 1, std::numeric_limits<int>::max());
  const std::int64_t n_qb = meta_int<std::int64_t>(md, "n_qb", 1, std::numeric_limits<std::int64_t>::max());
  const std::int64_t n_kvb = meta_int<std::int64_t>(md, "n_kvb", 1, std::numeric_limits<std::int64_t>::max());
  // The byte size is checked against the stored tensor before anything is allocated or read.
  std::int64_t bytes = 0;
  if (!packed_mask_bytes(heads, n_qb, n_kvb, &bytes))
    bad(fmt::format("metadata heads x n_qb x ceil(n_kvb / 8) = {} x {} x {} bytes overflows 64 bits", heads, n_qb,
                    ceil_div(n_kvb, 8)));
  const std::vector<std::uint64_t> want = {1, std::uint64_t(heads), std::uint64_t(n_qb),
                                           std::uint64_t(ceil_div(n_kvb, 8))};
  if (shape != want)
    bad(fmt::format("tensor 'mask' field 'shape' [{}, {}, {}, {}] disagrees with heads/n_qb/n_kvb (expected [{}, {}, "
                    "{}, {}])", shape[0], shape[1], shape[2], shape[3], want[0], want[1], want[2], want[3]));
  if (offs[0] != 0 || offs[1] != std::uint64_t(bytes))
    bad(fmt::format("tensor 'mask' field 'data_offsets' [{}, {}] does not match its shape ([0, {}])", offs[0], offs[1],
                    bytes));
  if (offs[1] > b.size() - 8 - n)
    bad(fmt::format("tensor 'mask' field 'data_offsets' [0, {}] needs {} bytes but the file holds {} after the header",
                    offs[1], offs[1], b.size() - 8 - n));
  if (offs[1] < b.size() - 8 - n)
    bad(fmt::format("{} bytes follow the tensor 'mask' (a safetensors file ends with its last tensor)",
                    b.size() - 8 - n - offs[1]));
  Case c;
  c.mask = PackedMask(heads, n_qb, n_kvb);
  if (!c.mask.bits.empty()) std::memcpy(c.mask.bits.data(), b.data() + 8 + n, c.mask.bits.size());
  // Bits past n_kvb in the last byte of every row are padding: they must be zero (else they would count as blocks).
  if (const int used = int(n_kvb % 8); used != 0 && c.mask.row_bytes > 0) {
    const std::uint8_t pad = std::uint8_t((1u << (8 - used)) - 1u);
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t q = 0; q < n_qb; ++q)
        if (c.mask.row(h, q)[c.mask.row_bytes - 1] & pad)
          bad(fmt::format("non-zero padding bits past n_kvb = {} in row (head {}, q block {})", n_kvb, h, q));
  }
  auto& m = c.meta;
  m.family = meta_str(md, "family");
  m.source_id = meta_str(md, "source_id");
  m.model = meta_str(md, "model");
  m.sparsifier = meta_str(md, "sparsifier");
  m.kind = meta_str(md, "kind");
  m.token_order = meta_str(md, "token_order");
  m.split = meta_str(md, "split");
  m.head_ids = meta_str(md, "head_ids");
  m.notes = meta_str(md, "notes");
  m.n_q = meta_extent(md, "n_q");
  m.n_kv = meta_extent(md, "n_kv");
  m.tokens_real = meta_extent(md, "tokens_real");
  m.block_q = meta_small(md, "block_q", 1);
  m.block_kv = meta_small(md, "block_kv", 1);
  m.heads = int(heads);
  m.step = meta_small(md, "step", 0);
  m.layer = meta_small(md, "layer", 0);
  m.chunk = meta_small(md, "chunk", 0);
  m.index = meta_small(md, "index", 0);
  m.seed = meta_int<std::uint64_t>(md, "seed", 0, std::numeric_limits<std::uint64_t>::max());
  if (ceil_div(m.n_q, m.block_q) != n_qb || ceil_div(m.n_kv, m.block_kv) != n_kvb)
    bad("n_q/block_q or n_kv/block_kv disagree with n_qb/n_kvb");
  if (m.family.empty() || m.source_id.empty()) bad("metadata 'family' and 'source_id' must not be empty");
  if (m.split != "profiling" && m.split != "evaluation")
    bad(fmt::format("metadata 'split' = '{}' is not 'profiling' or 'evaluation'", m.split));
  if (m.tokens_real > std::max(m.n_q, m.n_kv))
    bad(fmt::format("metadata 'tokens_real' = {} exceeds n_q = {} and n_kv = {}", m.tokens_real, m.n_q, m.n_kv));
  if (!m.head_ids.empty()) {  // a comma-separated list of one non-negative id per head
    std::int64_t ids = 0;
    for (std::size_t p = 0; p <= m.head_ids.size();) {
      const std::size_t q = std::min(m.head_ids.find(',', p), m.head_ids.size());
      const std::string id = m.head_ids.substr(p, q - p);
      int v = 0;
      const auto [e, ec] = std::from_chars(id.data(), id.data() + id.size(), v);
      if (id.empty() || ec != std::errc() || e != id.data() + id.size() || v < 0)
        bad(fmt::format("metadata 'head_ids' = '{}' is not a comma-separated list of non-negative integers",
                        m.head_ids));
      ++ids;
      p = q + 1;
    }
    if (ids != heads) bad(fmt::format("metadata 'head_ids' lists {} ids for {} heads", ids, heads));
  }
  return c;
}

void write_mask_file(const std::string& path, const Case& c) {
  const auto bytes = encode_mask_file(c);
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error(ErrorCode::kIoError, path, "cannot write the mask file");
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  out.close();
  if (!out) throw Error(ErrorCode::kIoError, path, "write failed");
}

Case read_mask_file(const std::string& path) {
  if (path.empty()) throw Error(ErrorCode::kIoError, "path", "the mask file path is empty");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(ErrorCode::kIoError, path, "is a directory, not a mask file");
  std::vector<std::uint8_t> bytes;
  try {
    errno = 0;
    std::ifstream in(path, std::ios::binary);
    if (!in)
      throw Error(ErrorCode::kIoError, path,
                  fmt::format("cannot read the mask file: {}", errno ? std::strerror(errno) : "open failed"));
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (in.bad()) throw Error(ErrorCode::kIoError, path, "read failed");
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kIoError, path, fmt::format("read failed: {}", e.what()));
  }
  try {
    return decode_mask_file(bytes);
  } catch (const Error& e) {
    throw Error(e.code(), path, e.message());  // name the file, not the word "file"
  }
}

}  // namespace tessera::corpus
