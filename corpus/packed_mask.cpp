#include "tessera_corpus/packed_mask.hpp"

#include <fmt/core.h>

#include <bit>

#include "tessera/error.hpp"

namespace tessera::corpus {

bool packed_mask_bytes(std::int64_t h, std::int64_t q, std::int64_t k, std::int64_t* bytes) noexcept {
  if (h < 0 || q < 0 || k < 0) return false;
  std::int64_t hq = 0;
  return !__builtin_mul_overflow(h, q, &hq) && !__builtin_mul_overflow(hq, k / 8 + (k % 8 != 0), bytes);
}

PackedMask::PackedMask(std::int64_t h, std::int64_t q, std::int64_t k) : heads(h), n_qb(q), n_kvb(k) {
  if (h < 0 || q < 0 || k < 0) throw Error(ErrorCode::kInvalidArgument, "mask", "negative mask extent");
  std::int64_t n = 0;
  if (!packed_mask_bytes(h, q, k, &n))
    throw Error(ErrorCode::kInvalidArgument, "mask",
                fmt::format("a mask of {} x {} x {} blocks overflows 64-bit byte counts", h, q, k));
  row_bytes = k / 8 + (k % 8 != 0);
  bits.assign(std::size_t(n), 0);
}

void PackedMask::set_range(std::int64_t h, std::int64_t q, std::int64_t k0, std::int64_t k1) noexcept {
  if (k0 < 0) k0 = 0;
  if (k1 > n_kvb) k1 = n_kvb;
  std::uint8_t* r = row(h, q);
  std::int64_t k = k0;
  for (; k < k1 && (k & 7); ++k) r[k >> 3] |= std::uint8_t(0x80u >> (k & 7));
  for (; k + 8 <= k1; k += 8) r[k >> 3] = 0xFF;
  for (; k < k1; ++k) r[k >> 3] |= std::uint8_t(0x80u >> (k & 7));
}

std::int64_t PackedMask::row_count(std::int64_t h, std::int64_t q) const noexcept {
  const std::uint8_t* r = row(h, q);
  std::int64_t c = 0;
  for (std::int64_t i = 0; i < row_bytes; ++i) c += std::popcount(unsigned(r[i]));
  return c;
}

std::int64_t PackedMask::count() const noexcept {
  std::int64_t c = 0;
  for (auto b : bits) c += std::popcount(unsigned(b));
  return c;
}

std::vector<std::uint8_t> unpack(const PackedMask& m) {
  std::int64_t n = 0;
  if (m.heads < 0 || m.n_qb < 0 || m.n_kvb < 0 || __builtin_mul_overflow(m.heads, m.n_qb, &n) ||
      __builtin_mul_overflow(n, m.n_kvb, &n))
    throw Error(ErrorCode::kInvalidArgument, "mask",
                fmt::format("a dense mask of {} x {} x {} blocks overflows 64-bit sizes", m.heads, m.n_qb, m.n_kvb));
  std::vector<std::uint8_t> d(static_cast<std::size_t>(n));
  std::size_t i = 0;
  for (std::int64_t h = 0; h < m.heads; ++h)
    for (std::int64_t q = 0; q < m.n_qb; ++q) {
      const std::uint8_t* r = m.row(h, q);
      for (std::int64_t k = 0; k < m.n_kvb; ++k) d[i++] = (r[k >> 3] >> (7 - (k & 7))) & 1u;
    }
  return d;
}

PackedMask pack(const std::uint8_t* dense, std::int64_t heads, std::int64_t n_qb, std::int64_t n_kvb) {
  PackedMask m(heads, n_qb, n_kvb);
  std::size_t i = 0;
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t q = 0; q < n_qb; ++q)
      for (std::int64_t k = 0; k < n_kvb; ++k)
        if (dense[i++]) m.set(h, q, k);
  return m;
}

OwnedBlockMask::OwnedBlockMask(const PackedMask& m) : data_(unpack(m)) {
  mask_ = BlockMask::from_dense(make_tensor(data_.data(), DType::kUInt8, Device::kCpu, {1, m.heads, m.n_qb, m.n_kvb}));
}

}  // namespace tessera::corpus
