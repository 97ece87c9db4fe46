#pragma once
// Swizzled shared-memory layout for tiles of 16-bit elements with rows of D elements (D a multiple of 64).
// A row is D/8 chunks of 16 bytes; logical chunk c of row r is stored at physical chunk c ^ (r % 8). Eight
// consecutive rows read at the same logical chunk (one ldmatrix 8x8 matrix) hit eight different 16-byte bank
// groups, so ldmatrix and 16-byte cp.async stores are free of bank conflicts.
#include <cstdint>

namespace tessera::ptx {

/// Byte offset of (row, chunk) in a swizzled tile with `Chunks` 16-byte chunks per row (Chunks >= 8).
template <int Chunks>
__host__ __device__ __forceinline__ constexpr std::uint32_t swizzle_offset(int row, int chunk) {
  static_assert(Chunks >= 8 && Chunks % 8 == 0, "rows must hold a multiple of 8 chunks of 16 bytes");
  return static_cast<std::uint32_t>((row * Chunks + (chunk ^ (row & 7))) * 16);
}

}  // namespace tessera::ptx
