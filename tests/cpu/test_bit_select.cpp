// nth_set_bit (core/bit_select.hpp), the select used by the GPU single-pass tile-row builder, against a bit-by-bit
// loop: every byte, structured words and 10^6 random words of several densities, every n < popcount.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "core/bit_select.hpp"

namespace tessera::prep {
namespace {

int naive_nth_set_bit(std::uint32_t h, int n) {
  for (int b = 0; b < 32; ++b) {
    if ((h >> b) & 1u) {
      if (n == 0) return b;
      --n;
    }
  }
  return -1;
}

// Checks every n of h; returns the number of mismatches (reports the first few).
int check_word(const ByteSelectTable& t, std::uint32_t h) {
  int bad = 0;
  const int c = popcount32(h);
  for (int n = 0; n < c; ++n) {
    const int want = naive_nth_set_bit(h, n);
    const int got = nth_set_bit(h, n, t.pos);
    if (got != want) {
      if (++bad <= 3) ADD_FAILURE() << "h = 0x" << std::hex << h << std::dec << ", n = " << n << ": " << got
                                    << " != " << want;
    }
  }
  return bad;
}

TEST(BitSelect, TableMatchesTheBitsOfEveryByte) {
  constexpr ByteSelectTable t = make_byte_select_table();
  for (int x = 0; x < 256; ++x) {
    const int c = popcount32(static_cast<std::uint32_t>(x));
    for (int n = 0; n < 8; ++n) {
      const int want = n < c ? naive_nth_set_bit(static_cast<std::uint32_t>(x), n) : 8;
      ASSERT_EQ(t.pos[x * 8 + n], want) << "x = " << x << ", n = " << n;
    }
  }
}

TEST(BitSelect, StructuredWords) {
  constexpr ByteSelectTable t = make_byte_select_table();
  int bad = 0;
  bad += check_word(t, 0xffffffffu);
  for (int b = 0; b < 32; ++b) {
    bad += check_word(t, 1u << b);
    bad += check_word(t, ~(1u << b));
    bad += check_word(t, (b == 0 ? 0u : 0xffffffffu >> (32 - b)));  // low b bits
    bad += check_word(t, 0xffffffffu << b);                          // high 32 - b bits
  }
  for (const std::uint32_t m : {0x55555555u, 0xaaaaaaaau, 0x11111111u, 0x01010101u, 0x80808080u, 0x0000ff00u,
                                0x00ff0000u, 0xff000000u, 0x000000ffu, 0x80000001u, 0x00010000u, 0x0000ffffu,
                                0xffff0000u})
    bad += check_word(t, m);
  EXPECT_EQ(bad, 0);
}

TEST(BitSelect, RandomWordsEveryRank) {
  constexpr ByteSelectTable t = make_byte_select_table();
  std::mt19937 rng(12345);
  int bad = 0;
  // 10^6 words: uniform words and words of density about 1/2, 1/4, 1/8, 1/16 (AND of 1..4 uniform words), so
  // sparse and dense halves and bytes all occur.
  for (int i = 0; i < 1000000; ++i) {
    std::uint32_t h = rng();
    for (int k = 0; k < i % 5; ++k) h &= rng();
    bad += check_word(t, h);
    if (bad > 10) break;
  }
  EXPECT_EQ(bad, 0);
}

}  // namespace
}  // namespace tessera::prep
