#pragma once
// Device helpers for membership words of 1, 2, 4 or 8 bytes (MemberWord<member_bytes(p)>, core/tile_metadata.hpp)
// that several writers OR into: the two-pass builder's packed entries, which one warp fills over several batches
// or windows (launch_prep_tiles.cu; packed c_q > 1 runs there only when its rows are too long for the single-pass
// builder's bitmaps, which stores each packed entry's OR once, without atomics). CUDA has atomicOr for 32- and 64-bit
// words only, so a 1- or 2-byte word is OR-ed through the aligned 32-bit word that holds it, with its bits shifted
// into place: the OR leaves the other bytes (neighbouring entries, possibly another warp's row) unchanged. Every
// access to such a word on that path (the clear too) is then a 32-bit atomic, so no access of another size overlaps
// it. The member buffer is allocated in whole 8-byte words (launch_prep.cu), so the containing word of the last
// entry is inside it.
// Also the host-side dispatch of a kernel templated on the word type. CUDA code only.
#include <cstdint>

namespace tessera::prep::detail {

// The aligned 32-bit word that holds the narrow word at `at`, and the shift of its bits in it (little-endian). Pointer
// arithmetic on `at` (no round trip through an integer), so the compiler keeps its global address space (RED.E.OR
// on a global address instead of a generic atomic with a return value).
template <class Member>
__device__ __forceinline__ unsigned* containing_word(Member* at, int& shift) {
  static_assert(sizeof(Member) < 4);
  const auto byte = static_cast<int>(reinterpret_cast<std::uintptr_t>(at) & 3u);
  shift = byte * 8;
  return reinterpret_cast<unsigned*>(reinterpret_cast<char*>(at) - byte);
}

/// *at = 0, before member_atomic_or() calls on the same word (ordered after it by the caller, e.g. __syncwarp).
template <class Member>
__device__ __forceinline__ void member_clear(Member* at) {
  if constexpr (sizeof(Member) >= 4) {
    *at = 0;
  } else {
    int shift;
    unsigned* w = containing_word(at, shift);
    atomicAnd(w, ~(((1u << (8 * sizeof(Member))) - 1u) << shift));
  }
}

/// *at |= bits, atomically (bits fit in Member).
template <class Member>
__device__ __forceinline__ void member_atomic_or(Member* at, std::uint64_t bits) {
  if constexpr (sizeof(Member) == 8) {
    atomicOr(reinterpret_cast<unsigned long long*>(at), static_cast<unsigned long long>(bits));
  } else if constexpr (sizeof(Member) == 4) {
    atomicOr(reinterpret_cast<unsigned*>(at), static_cast<unsigned>(bits));
  } else {
    int shift;
    unsigned* w = containing_word(at, shift);
    atomicOr(w, static_cast<unsigned>(static_cast<Member>(bits)) << shift);
  }
}

/// Host: calls f(Member{}) with Member = MemberWord<bytes> for bytes 1, 2 and 4, and std::uint64_t otherwise (8, or
/// 0 = no membership, where the kernels get null member pointers), to launch a kernel templated on the word type.
template <class F>
void dispatch_member_word(std::int32_t bytes, F&& f) {
  switch (bytes) {
    case 1: f(std::uint8_t{}); break;
    case 2: f(std::uint16_t{}); break;
    case 4: f(std::uint32_t{}); break;
    default: f(std::uint64_t{}); break;
  }
}

}  // namespace tessera::prep::detail
