#pragma once
/// @file geometry.hpp
/// Logical block geometry B = (B_Q, B_KV): how many query / key-value tokens one logical mask block covers.
#include <cstdint>

namespace tessera {

/// Smallest and largest logical block size, in tokens (DESIGN.md section 2). Sizes must be multiples of 16.
inline constexpr int kMinBlockSize = 16;
inline constexpr int kMaxBlockSize = 1024;

/// True for a logical block size the runtime accepts: a multiple of 16 tokens in [kMinBlockSize, kMaxBlockSize].
inline constexpr bool is_block_size(std::int64_t b) noexcept {
  return b >= kMinBlockSize && b <= kMaxBlockSize && b % 16 == 0;
}

/// Logical block geometry, in tokens. Both sizes must be multiples of 16 in [16, 1024].
struct BlockGeometry {
  int block_q = 64;   ///< B_Q: query tokens per logical block
  int block_kv = 64;  ///< B_KV: key/value tokens per logical block
};

/// Number of blocks of `block` tokens that cover `tokens` tokens: ceil(tokens / block). The last may be partial.
constexpr std::int64_t num_blocks(std::int64_t tokens, std::int64_t block) noexcept {
  return (tokens + block - 1) / block;
}

}  // namespace tessera
