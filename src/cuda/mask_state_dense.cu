// mu(M) from a dense block mask: pass 1 turns each row into 32-column bit words (16-byte vector loads where the
// kv dimension is contiguous, warp ballots otherwise) and counts them; pass 2 writes the columns from the bits.
#include "cuda/check.cuh"
#include "cuda/mask_state_common.cuh"
#include "cuda/mask_state_launch.hpp"

namespace tessera::detail {

namespace {

constexpr int kWarps = 8;

/// Non-zero bytes of a 4-byte word as 4 bits (byte i -> bit i).
__device__ inline std::uint32_t nonzero4(std::uint32_t w) {
  const std::uint32_t m = __vcmpne4(w, 0u) & 0x01010101u;
  return ((m * 0x00204081u) >> 21) & 0xFu;
}

/// Bits [lo, hi) of a 16-bit word, lo and hi clamped to [0, 16].
__device__ inline std::uint32_t bit_range16(std::int64_t lo, std::int64_t hi) {
  const int l = lo < 0 ? 0 : lo > 16 ? 16 : static_cast<int>(lo);
  const int h = hi < 0 ? 0 : hi > 16 ? 16 : static_cast<int>(hi);
  return h > l ? (1u << h) - (1u << l) : 0u;
}

/// Bits of the 16 bytes at `p` (16-byte aligned) that lie in the row [r_lo, r_hi). One 16-byte load whenever the
/// 16 bytes lie inside the tensor's span [t_lo, t_hi) (bytes of neighbouring rows or padding are then read and
/// masked off); byte loads only at the two ends of the span.
__device__ inline std::uint32_t load16(const unsigned char* p, const unsigned char* t_lo, const unsigned char* t_hi,
                                       const unsigned char* r_lo, const unsigned char* r_hi) {
  const std::uint32_t keep = bit_range16(r_lo - p, r_hi - p);
  if (keep == 0u) return 0u;
  if (p >= t_lo && p + 16 <= t_hi) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    return (nonzero4(v.x) | nonzero4(v.y) << 4 | nonzero4(v.z) << 8 | nonzero4(v.w) << 12) & keep;
  }
  std::uint32_t r = 0;
  for (int i = 0; i < 16; ++i) {
    if ((keep >> i & 1u) && __ldg(p + i) != 0) r |= 1u << i;
  }
  return r;
}

struct RowGeom {
  const unsigned char* row;  // first byte of the row
  int delta;                 // columns before column 0 in the first word
  int n_words;
};

template <bool kContiguous>
__device__ inline RowGeom row_geom(const DenseMaskArgs& a, std::int64_t row) {
  const std::int64_t qb = row % a.n_qb;
  const std::int64_t t = row / a.n_qb;
  const std::int64_t h = t % a.heads;
  const std::int64_t b = t / a.heads;
  RowGeom g;
  g.row = a.data + b * a.stride[0] + h * a.stride[1] + qb * a.stride[2];
  g.delta = kContiguous ? static_cast<int>(reinterpret_cast<std::uintptr_t>(g.row) & 15u) : 0;
  g.n_words = static_cast<int>((g.delta + a.n_kvb + 31) / 32);
  return g;
}

template <bool kContiguous>
__global__ void __launch_bounds__(kWarps * 32) dense_count_kernel(DenseMaskArgs a, std::uint32_t* bitmap,
                                                                  std::int32_t* row_count, DeviceCounters* c) {
  __shared__ unsigned long long smem[kWarps * 5];
  const int lane = threadIdx.x % 32;
  const std::int64_t wpr = dense_words_per_row(a.n_kvb);
  const std::int64_t warp0 = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const std::int64_t n_warps = static_cast<std::int64_t>(gridDim.x) * kWarps;
  if (warp0 == 0 && lane == 0) row_count[a.rows] = 0;
  WarpCounts w;
  for (std::int64_t row = warp0; row < a.rows; row += n_warps) {
    const RowGeom g = row_geom<kContiguous>(a, row);
    WordCounts wc;
    if constexpr (kContiguous) {
      const unsigned char* a0 = g.row - g.delta;
      const unsigned char* hi = g.row + a.n_kvb;
      const unsigned char* t_hi = a.data + a.span;
      wc = count_row_words(
          [&](int k) {
            const unsigned char* p = a0 + 32 * static_cast<std::int64_t>(k);
            return load16(p, a.data, t_hi, g.row, hi) | load16(p + 16, a.data, t_hi, g.row, hi) << 16;
          },
          g.n_words, bitmap + row * wpr, lane);
    } else {
      // Word k = ballot over columns 32 k + lane; lane k % 32 keeps word k. All lanes take part in every ballot.
      WordCounts acc;
      std::uint32_t carry = 0;
      for (int k0 = 0; k0 < g.n_words; k0 += 32) {
        std::uint32_t mine = 0;
        const int kend = min(32, g.n_words - k0);
        for (int s = 0; s < kend; ++s) {
          const std::int64_t col = 32 * static_cast<std::int64_t>(k0 + s) + lane;
          const bool on = col < a.n_kvb && __ldg(g.row + col * a.stride[3]) != 0;
          const std::uint32_t word = __ballot_sync(kFullWarp, on);
          if (lane == s) mine = word;
        }
        const int k = k0 + lane;
        if (k < g.n_words) bitmap[row * wpr + k] = mine;
        std::uint32_t prev = __shfl_up_sync(kFullWarp, mine, 1);
        if (lane == 0) prev = carry;
        acc.add(mine, prev);
        carry = __shfl_sync(kFullWarp, mine, 31);
      }
      wc.active = warp_sum(acc.active);
      wc.runs = warp_sum(acc.runs);
      wc.long_blocks = warp_sum(acc.long_blocks);
    }
    if (lane == 0) row_count[row] = wc.active;
    add_row(w, wc.active, wc.runs, wc.long_blocks);
  }
  block_flush(w, c, smem);
}

template <bool kContiguous>
__global__ void __launch_bounds__(kWarps * 32) dense_emit_kernel(DenseMaskArgs a, const std::uint32_t* bitmap,
                                                                 const std::int32_t* row_offsets,
                                                                 std::int32_t* col_indices,
                                                                 const DeviceCounters* guard, long long capacity) {
  if (pass2_skipped(guard, capacity)) return;
  const int lane = threadIdx.x % 32;
  const std::int64_t wpr = dense_words_per_row(a.n_kvb);
  const std::int64_t warp0 = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const std::int64_t n_warps = static_cast<std::int64_t>(gridDim.x) * kWarps;
  for (std::int64_t row = warp0; row < a.rows; row += n_warps) {
    const RowGeom g = row_geom<kContiguous>(a, row);
    const std::uint32_t* words = bitmap + row * wpr;
    emit_row_words([&](int k) { return words[k]; }, g.n_words, g.delta, col_indices + row_offsets[row], lane);
  }
}

bool contiguous_cols(const DenseMaskArgs& a) { return a.stride[3] == 1 || a.n_kvb == 1; }

}  // namespace

void launch_dense_count(const DenseMaskArgs& a, std::uint32_t* bitmap, std::int32_t* row_count, DeviceCounters* c,
                        int grid, cudaStream_t s) {
  if (contiguous_cols(a)) {
    dense_count_kernel<true><<<grid, kWarps * 32, 0, s>>>(a, bitmap, row_count, c);
  } else {
    dense_count_kernel<false><<<grid, kWarps * 32, 0, s>>>(a, bitmap, row_count, c);
  }
  TESSERA_CUDA_CHECK_LAUNCH();
}

void launch_dense_emit(const DenseMaskArgs& a, const std::uint32_t* bitmap, const std::int32_t* row_offsets,
                       std::int32_t* col_indices, const DeviceCounters* guard, long long capacity, int grid,
                       cudaStream_t s) {
  if (contiguous_cols(a)) {
    dense_emit_kernel<true><<<grid, kWarps * 32, 0, s>>>(a, bitmap, row_offsets, col_indices, guard, capacity);
  } else {
    dense_emit_kernel<false><<<grid, kWarps * 32, 0, s>>>(a, bitmap, row_offsets, col_indices, guard, capacity);
  }
  TESSERA_CUDA_CHECK_LAUNCH();
}

}  // namespace tessera::detail
