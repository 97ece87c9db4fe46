#pragma once
// Select: the position of the n-th set bit of a 32-bit word, through a byte table. Host and device (TESSERA_HD):
// the GPU tile-row builder (launch_prep_rows_single_pass.cu) keeps the table in shared memory, and the CPU test
// checks this same code against a bit-by-bit loop.
#include <bit>
#include <cstdint>

#include "core/hd.hpp"

namespace tessera::prep {

/// Byte select table: pos[x * 8 + n] = position (0..7) of the n-th set bit (n from 0) of the byte x; 8 where x has
/// n or fewer set bits. 2,048 bytes, 16-byte aligned (the GPU copies it to shared memory in 16-byte words).
struct alignas(16) ByteSelectTable {
  std::uint8_t pos[256 * 8];
};

/// The table's contents (constant-evaluated for the device copy).
constexpr ByteSelectTable make_byte_select_table() {
  ByteSelectTable t{};
  for (int x = 0; x < 256; ++x) {
    int n = 0;
    for (int b = 0; b < 8; ++b)
      if ((x >> b) & 1) t.pos[x * 8 + n++] = static_cast<std::uint8_t>(b);
    for (; n < 8; ++n) t.pos[x * 8 + n] = 8;
  }
  return t;
}

/// Set bits of x.
TESSERA_HD inline int popcount32(std::uint32_t x) {
#if defined(__CUDA_ARCH__)
  return __popc(x);
#else
  return std::popcount(x);
#endif
}

/// Position (0..31) of the n-th set bit (n from 0) of h. Precondition: 0 <= n < popcount32(h) (then it reads
/// table[0 .. 2047] only). `table`: make_byte_select_table().pos. Two popcount halvings (16, 8 bits) find the
/// byte, the table the bit inside it.
TESSERA_HD inline int nth_set_bit(std::uint32_t h, int n, const std::uint8_t* table) {
  const int c16 = popcount32(h & 0xffffu);
  const int hi16 = n >= c16 ? 16 : 0;
  n -= n >= c16 ? c16 : 0;
  const std::uint32_t x16 = h >> hi16;
  const int c8 = popcount32(x16 & 0xffu);
  const int hi8 = n >= c8 ? 8 : 0;
  n -= n >= c8 ? c8 : 0;
  const int pos = hi16 + hi8;
  return pos + table[((h >> pos) & 0xffu) * 8 + n];
}

}  // namespace tessera::prep
