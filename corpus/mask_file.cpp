#include "tessera_corpus/mask_file.hpp"

#include <fmt/core.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "tessera/error.hpp"

namespace tessera::corpus {

namespace {
constexpr const char* kFormat = "tessera-mask-v1";
constexpr const char* kBitOrder = "numpy.packbits(dense, axis=-1), big-endian bits, rows padded to whole bytes";

[[noreturn]] void bad(const std::string& what) { throw Error(ErrorCode::kFormatError, "mask file", what); }

std::string meta_str(const nlohmann::json& md, const char* key) {
  if (!md.contains(key) || !md[key].is_string()) bad(fmt::format("metadata '{}' missing or not a string", key));
  return md[key].get<std::string>();
}
std::int64_t meta_int(const nlohmann::json& md, const char* key) {
  const std::string s = meta_str(md, key);
  try {
    std::size_t pos = 0;
    const long long v = std::stoll(s, &pos);
    if (pos != s.size()) throw std::invalid_argument(s);
    return v;
  } catch (const std::exception&) {
    bad(fmt::format("metadata '{}' = '{}' is not an integer", key, s));
  }
}
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
  if (!header.contains("__metadata__") || !header["__metadata__"].is_object()) bad("no __metadata__");
  const auto& md = header["__metadata__"];
  if (meta_str(md, "format") != kFormat) bad("format is not " + std::string(kFormat));
  if (!header.contains("mask")) bad("no tensor 'mask'");
  const auto& t = header["mask"];
  if (t.value("dtype", "") != "U8") bad("tensor 'mask' dtype is not U8");
  const auto shape = t.value("shape", std::vector<std::int64_t>{});
  const auto offs = t.value("data_offsets", std::vector<std::uint64_t>{});
  const std::int64_t heads = meta_int(md, "heads"), n_qb = meta_int(md, "n_qb"), n_kvb = meta_int(md, "n_kvb");
  if (heads < 0 || n_qb < 0 || n_kvb < 0) bad("negative extent");
  Case c;
  c.mask = PackedMask(heads, n_qb, n_kvb);
  const std::vector<std::int64_t> want = {1, heads, n_qb, c.mask.row_bytes};
  if (shape != want) bad("tensor 'mask' shape disagrees with heads/n_qb/n_kvb");
  if (offs.size() != 2 || offs[0] != 0 || offs[1] != c.mask.bits.size() || 8 + n + offs[1] > b.size())
    bad("tensor 'mask' data_offsets do not match its shape or the file size");
  std::memcpy(c.mask.bits.data(), b.data() + 8 + n, c.mask.bits.size());
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
  m.n_q = meta_int(md, "n_q");
  m.n_kv = meta_int(md, "n_kv");
  m.tokens_real = meta_int(md, "tokens_real");
  m.block_q = int(meta_int(md, "block_q"));
  m.block_kv = int(meta_int(md, "block_kv"));
  m.heads = int(heads);
  m.step = int(meta_int(md, "step"));
  m.layer = int(meta_int(md, "layer"));
  m.chunk = int(meta_int(md, "chunk"));
  m.index = int(meta_int(md, "index"));
  m.seed = std::uint64_t(std::stoull(meta_str(md, "seed")));
  if (m.block_q <= 0 || m.block_kv <= 0 || (m.n_q + m.block_q - 1) / m.block_q != n_qb ||
      (m.n_kv + m.block_kv - 1) / m.block_kv != n_kvb)
    bad("n_q/block_q or n_kv/block_kv disagree with n_qb/n_kvb");
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
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(ErrorCode::kIoError, path, "is a directory, not a mask file");
  std::vector<std::uint8_t> bytes;
  try {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(ErrorCode::kIoError, path, "cannot read the mask file");
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
