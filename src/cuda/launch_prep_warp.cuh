#pragma once
// Warp-level helpers and unit arithmetic shared by the GPU tile-row builders (launch_prep_tiles.cu,
// launch_prep_rows_single_pass.cu). Device code only.
#include <cstdint>

#include "core/launch_prep_rules.hpp"

namespace tessera::prep::detail {

inline constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ std::int32_t warp_sum(std::int32_t v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

__device__ __forceinline__ std::int32_t warp_min(std::int32_t v) {
  for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(kFull, v, o));
  return v;
}

__device__ __forceinline__ std::int32_t warp_max(std::int32_t v) {
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(kFull, v, o));
  return v;
}

__device__ __forceinline__ std::int32_t warp_exclusive_scan(std::int32_t v, int lane) {
  std::int32_t x = v;
  for (int o = 1; o < 32; o <<= 1) {
    const std::int32_t y = __shfl_up_sync(kFull, x, o);
    if (lane >= o) x += y;
  }
  return x - v;
}

__device__ __forceinline__ unsigned lanes_below(int lane) { return (1u << lane) - 1u; }

// Highest set lane of `m` (-1 when m == 0).
__device__ __forceinline__ int highest_lane(unsigned m) { return 31 - __clz(m); }

// The lane that holds rank e when lane L holds ranks [excl_L, excl_L + count_L) and excl is the warp's exclusive
// scan of the counts: the largest lane with excl <= e (it has count > 0 when e < the total). All lanes; a binary
// search with shuffles.
__device__ __forceinline__ int warp_owner_lane(std::int32_t excl, std::int32_t e) {
  int owner = 0;
#pragma unroll
  for (int step = 16; step > 0; step >>= 1) {
    const int probe = owner | step;  // owner's bits below step are still zero
    if (__shfl_sync(kFull, excl, probe) <= e) owner = probe;
  }
  return owner;
}

// OR of `bits` over the run of consecutive lanes from this one on that share `key`, for runs of at most `span`
// lanes (span a power of two <= 32): on return a run's first lane holds the OR of the whole run. All lanes.
// Bits: std::uint32_t or std::uint64_t.
template <class Bits>
__device__ __forceinline__ Bits warp_segmented_or_down(Bits bits, std::int32_t key, int span) {
  const int lane = threadIdx.x % 32;
  for (int off = 1; off < span; off <<= 1) {
    const Bits ob = __shfl_down_sync(kFull, bits, off);
    const std::int32_t ok = __shfl_down_sync(kFull, key, off);
    if (lane + off < 32 && ok == key) bits |= ob;
  }
  return bits;
}

// k / r and k % r for a Refined-KV factor r in {1, 2, 3, 4, 6, 8}: shifts for powers of two, else a division.
struct RefineDivider {
  int r, shift;
  bool pow2;
  __device__ __forceinline__ explicit RefineDivider(int r_) : r(r_), shift(0), pow2((r_ & (r_ - 1)) == 0) {
    while ((1 << shift) < r) ++shift;  // log2 r when r is a power of two (unused otherwise)
  }
  __device__ __forceinline__ std::int32_t div(std::int32_t k) const { return pow2 ? k >> shift : k / r; }
  __device__ __forceinline__ std::int32_t mod(std::int32_t k) const { return pow2 ? k & (r - 1) : k - (k / r) * r; }
};

// log2 of a mapping factor in {1, 2, 4, 8} (c_kv, pack; not r_kv, which may be 3 or 6: RefineDivider).
__device__ __forceinline__ int log2_factor(int f) { return f == 1 ? 0 : f == 2 ? 1 : f == 4 ? 2 : 3; }

// Bits at the first block of every c_kv-group of a 32-bit word (c_kv a power of two <= 8) that holds an active
// block.
__device__ __forceinline__ std::uint32_t group_heads(std::uint32_t u, int c_kv) {
  std::uint32_t g = u;
  for (int s = 1; s < c_kv; s <<= 1) g |= g >> s;
  const std::uint32_t heads = c_kv == 1 ? 0xffffffffu : c_kv == 2 ? 0x55555555u : c_kv == 4 ? 0x11111111u : 0x01010101u;
  return g & heads;
}

// Entries of unit u on a span form: r_kv, fewer for the ragged last unit (rules: tile u*r + j < kv_tiles).
__device__ __forceinline__ std::int32_t unit_entries(const PrepParams& p, std::int32_t u) {
  const std::int64_t left = p.kv_tiles - static_cast<std::int64_t>(u) * p.r_kv;
  return left < p.r_kv ? static_cast<std::int32_t>(left) : p.r_kv;
}

/// A tile row's unit arithmetic (see the rules header): how many entries (span forms) or units (packed) the c_kv
/// group heads of one 32-block word produce, and the ragged last unit of Refined KV.
struct UnitRules {
  int c_kv, log_ckv, pack, r_kv;
  std::uint32_t group_mask;  ///< c_kv low bits: the blocks of one unit inside a word
  std::int32_t last_unit;    ///< ceil(n_kvb / c_kv) - 1
  std::int32_t last_extra;   ///< entries of the last unit minus r_kv (<= 0; 0 when packed)

  // last_unit = row_units(p) - 1 = ceil(n_kvb / c_kv) - 1, by a shift (c_kv is a power of two): a 64-bit division
  // here made the fields costly to rebuild, so the compiler spilled them instead.
  __device__ explicit UnitRules(const PrepParams& p)
      : c_kv(p.c_kv), log_ckv(log2_factor(p.c_kv)), pack(p.pack), r_kv(p.r_kv), group_mask((1u << p.c_kv) - 1u),
        last_unit(static_cast<std::int32_t>((p.n_kvb + p.c_kv - 1) >> log_ckv) - 1),
        last_extra(p.pack ? 0 : unit_entries(p, last_unit) - p.r_kv) {}

  /// Entries (span) or units (packed) of the group heads `heads` of the word whose first block is `word_col`.
  __device__ __forceinline__ std::int32_t count(std::uint32_t heads, std::int32_t word_col) const {
    std::int32_t n = __popc(heads);
    if (pack) return n;
    n *= r_kv;
    if (last_extra != 0) {
      const std::int32_t lb = (last_unit << log_ckv) - word_col;  // bit of the last unit's head in this word
      if (lb >= 0 && lb < 32 && ((heads >> lb) & 1u)) n += last_extra;
    }
    return n;
  }

  /// Entries of unit `unit` (span forms).
  __device__ __forceinline__ std::int32_t entries(std::int32_t unit) const {
    return unit == last_unit ? r_kv + last_extra : r_kv;
  }
};

}  // namespace tessera::prep::detail
