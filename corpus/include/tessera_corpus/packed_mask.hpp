#pragma once
/// @file packed_mask.hpp
/// A bit-packed block mask of one case, [B_m = 1, H, n_qb, n_kvb]. Bit order (also the file format): each row
/// (h, qb) occupies row_bytes = ceil(n_kvb / 8) bytes; kv block k is bit (7 - k % 8) of byte k / 8, i.e.
/// numpy.packbits(dense, axis=-1) with the default big-endian bit order; pad bits at the end of a row are 0.
#include <cstdint>
#include <vector>

#include "tessera/mask.hpp"

namespace tessera::corpus {

/// Byte size heads * n_qb * ceil(n_kvb / 8) of a packed mask, into *bytes. Returns false (leaving *bytes
/// unspecified) when an extent is negative or the size overflows std::int64_t.
bool packed_mask_bytes(std::int64_t heads, std::int64_t n_qb, std::int64_t n_kvb, std::int64_t* bytes) noexcept;

struct PackedMask {
  std::int64_t heads = 0, n_qb = 0, n_kvb = 0;
  std::int64_t row_bytes = 0;     ///< ceil(n_kvb / 8)
  std::vector<std::uint8_t> bits;  ///< [heads, n_qb, row_bytes]

  PackedMask() = default;
  /// All-zero mask. Throws tessera::Error(kInvalidArgument, "mask") for negative extents or a byte size that
  /// overflows std::int64_t (packed_mask_bytes).
  PackedMask(std::int64_t heads, std::int64_t n_qb, std::int64_t n_kvb);

  std::uint8_t* row(std::int64_t h, std::int64_t q) noexcept { return bits.data() + (h * n_qb + q) * row_bytes; }
  const std::uint8_t* row(std::int64_t h, std::int64_t q) const noexcept {
    return bits.data() + (h * n_qb + q) * row_bytes;
  }
  bool get(std::int64_t h, std::int64_t q, std::int64_t k) const noexcept {
    return (row(h, q)[k >> 3] >> (7 - (k & 7))) & 1u;
  }
  void set(std::int64_t h, std::int64_t q, std::int64_t k) noexcept {
    row(h, q)[k >> 3] |= std::uint8_t(0x80u >> (k & 7));
  }
  /// Sets kv blocks [k0, k1) of one row.
  void set_range(std::int64_t h, std::int64_t q, std::int64_t k0, std::int64_t k1) noexcept;
  /// Sets every kv block of one row.
  void set_row(std::int64_t h, std::int64_t q) noexcept { set_range(h, q, 0, n_kvb); }
  /// Active blocks of one row / of the whole mask.
  std::int64_t row_count(std::int64_t h, std::int64_t q) const noexcept;
  std::int64_t count() const noexcept;
  bool operator==(const PackedMask&) const = default;
};

/// Dense uint8 copy [1, H, n_qb, n_kvb] (0/1) of a packed mask. Throws tessera::Error(kInvalidArgument, "mask")
/// when H * n_qb * n_kvb overflows std::int64_t.
std::vector<std::uint8_t> unpack(const PackedMask& m);
/// Packs a dense [H, n_qb, n_kvb] mask (non-zero = active).
PackedMask pack(const std::uint8_t* dense, std::int64_t heads, std::int64_t n_qb, std::int64_t n_kvb);

/// A tessera::BlockMask in dense format that owns its host buffer (uint8 [1, H, n_qb, n_kvb], contiguous).
/// Not copyable (the view points into the buffer); movable.
class OwnedBlockMask {
 public:
  explicit OwnedBlockMask(const PackedMask& m);
  OwnedBlockMask(OwnedBlockMask&&) noexcept = default;
  OwnedBlockMask& operator=(OwnedBlockMask&&) noexcept = default;
  OwnedBlockMask(const OwnedBlockMask&) = delete;
  OwnedBlockMask& operator=(const OwnedBlockMask&) = delete;
  const BlockMask& mask() const noexcept { return mask_; }
  const std::vector<std::uint8_t>& data() const noexcept { return data_; }

 private:
  std::vector<std::uint8_t> data_;
  BlockMask mask_;
};

}  // namespace tessera::corpus
