#pragma once
// Device helpers shared by the mask-state kernels (src/cuda/mask_state_*.cu): per-row run counting on 32-column
// bit words, block-level reduction of the counters, the first-error word, and emission of sorted columns.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/mask_state_counters.hpp"

namespace tessera::detail {

inline constexpr unsigned kFullWarp = 0xffffffffu;


/// Error kinds, in the order build_mask_state_cpu() checks them.
enum DeviceErrorKind : unsigned long long {
  kErrRowOffsets = 0,  ///< mask.row_offsets (position: offsets index)
  kErrCounts = 1,      ///< mask.counts (position: row)
  kErrColumns = 2,     ///< mask.col_indices (position in col_indices) / mask.indices (row * K_max + j)
};

__device__ inline void record_error(DeviceCounters* c, unsigned long long kind, unsigned long long position) {
  const unsigned long long key = (kind << 60) | (position & ((1ull << 60) - 1));
  atomicMax(&c->error_inv, ~key);
}

/// Per-warp running counters (64-bit; totals over all rows a warp handles).
struct WarpCounts {
  unsigned long long active = 0, runs = 0, long_blocks = 0, max_row = 0, empty_rows = 0;
};

/// Run statistics of one 32-column word `bits` whose preceding word (columns just before) is `prev`.
/// runs: active blocks whose left neighbour is inactive; blocks in runs of length >= 2 = adjacent active pairs
/// + runs of length >= 2 (a pair whose left block starts a run).
struct WordCounts {
  int active = 0, runs = 0, long_blocks = 0;
  __device__ void add(std::uint32_t bits, std::uint32_t prev) {
    const std::uint32_t l1 = (bits << 1) | (prev >> 31);
    const std::uint32_t l2 = (bits << 2) | (prev >> 30);
    const std::uint32_t pairs = bits & l1;
    active += __popc(bits);
    runs += __popc(bits & ~l1);
    long_blocks += __popc(pairs) + __popc(pairs & ~l2);
  }
};

__device__ inline int warp_sum(int v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullWarp, v, o);
  return v;
}

/// Adds one row's warp-reduced counts (valid in every lane) to the warp totals.
__device__ inline void add_row(WarpCounts& w, int active, int runs, int long_blocks) {
  w.active += static_cast<unsigned long long>(active);
  w.runs += static_cast<unsigned long long>(runs);
  w.long_blocks += static_cast<unsigned long long>(long_blocks);
  w.max_row = max(w.max_row, static_cast<unsigned long long>(active));
  w.empty_rows += active == 0 ? 1ull : 0ull;
}

/// Reduces the warps' totals of one block and adds them to `c` (one set of atomics per block). Every thread of
/// the block must call it. `smem` holds 5 * warps_per_block values.
__device__ inline void block_flush(const WarpCounts& w, DeviceCounters* c, unsigned long long* smem) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  if (lane == 0) {
    smem[warp * 5 + 0] = w.active;
    smem[warp * 5 + 1] = w.runs;
    smem[warp * 5 + 2] = w.long_blocks;
    smem[warp * 5 + 3] = w.max_row;
    smem[warp * 5 + 4] = w.empty_rows;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    WarpCounts t;
    for (int i = 0; i < warps; ++i) {
      t.active += smem[i * 5 + 0];
      t.runs += smem[i * 5 + 1];
      t.long_blocks += smem[i * 5 + 2];
      t.max_row = max(t.max_row, smem[i * 5 + 3]);
      t.empty_rows += smem[i * 5 + 4];
    }
    if (t.active) atomicAdd(&c->active, t.active);
    if (t.runs) atomicAdd(&c->runs, t.runs);
    if (t.long_blocks) atomicAdd(&c->long_blocks, t.long_blocks);
    if (t.max_row) atomicMax(&c->max_row, t.max_row);
    if (t.empty_rows) atomicAdd(&c->empty_rows, t.empty_rows);
  }
}

/// Counts a row given as `n_words` 32-column words (word k covers columns 32 k - delta .. 32 k - delta + 31;
/// columns outside the row are 0 bits). word_at(k) is called for k < n_words by lane k % 32. If `store` is not
/// null, word k is also written to store[k]. Returns the warp-reduced counts in every lane.
template <class WordAt>
__device__ inline WordCounts count_row_words(WordAt word_at, int n_words, std::uint32_t* store, int lane) {
  WordCounts wc;
  std::uint32_t carry = 0;
  // 64 words per step: both loads are issued before either is used (a row of up to ~2000 columns in one memory
  // round trip instead of two dependent ones).
  for (int k0 = 0; k0 < n_words; k0 += 64) {
    const int ka = k0 + lane, kb = k0 + 32 + lane;
    const std::uint32_t a = ka < n_words ? word_at(ka) : 0u;
    const std::uint32_t b = kb < n_words ? word_at(kb) : 0u;
    if (store && ka < n_words) store[ka] = a;
    if (store && kb < n_words) store[kb] = b;
    std::uint32_t prev = __shfl_up_sync(kFullWarp, a, 1);
    if (lane == 0) prev = carry;
    wc.add(a, prev);
    carry = __shfl_sync(kFullWarp, a, 31);
    prev = __shfl_up_sync(kFullWarp, b, 1);
    if (lane == 0) prev = carry;
    wc.add(b, prev);
    carry = __shfl_sync(kFullWarp, b, 31);
  }
  wc.active = warp_sum(wc.active);
  wc.runs = warp_sum(wc.runs);
  wc.long_blocks = warp_sum(wc.long_blocks);
  return wc;
}

/// Writes the columns of a row given as 32-column words (as in count_row_words) to out[0 ..), ascending.
/// word_at(k) is called for k < n_words by lane k % 32 (one coalesced load per 32 words). Each non-zero word is
/// then broadcast and expanded by the whole warp (lane i tests bit i), so every store instruction writes a
/// contiguous run of out: coalesced, and no loop over the densest word's bits in every lane.
template <class WordAt>
__device__ inline void emit_row_words(WordAt word_at, int n_words, int delta, std::int32_t* out, int lane) {
  const std::uint32_t below = (1u << lane) - 1u;  // lanes < lane
  int written = 0;
  for (int k0 = 0; k0 < n_words; k0 += 32) {
    const int k = k0 + lane;
    const std::uint32_t mine = k < n_words ? word_at(k) : 0u;
    std::uint32_t nonzero = __ballot_sync(kFullWarp, mine != 0u);
    while (nonzero) {
      const int src = __ffs(static_cast<int>(nonzero)) - 1;
      nonzero &= nonzero - 1u;
      const std::uint32_t bits = __shfl_sync(kFullWarp, mine, src);
      if ((bits >> lane) & 1u) out[written + __popc(bits & below)] = 32 * (k0 + src) - delta + lane;
      written += __popc(bits);
    }
  }
}

/// Speculative pass 2 (mask_state.cu): true when the block must not write, i.e. pass 1 flagged an error or the
/// active blocks exceed `capacity` (elements of col_indices; <= 2^31 - 1, so the int32 offsets are exact when it
/// is false). `guard` null: no guard (the host has read the counters). Uniform over the block.
__device__ inline bool pass2_skipped(const DeviceCounters* guard, long long capacity) {
  if (!guard) return false;
  const volatile DeviceCounters* g = guard;
  return g->error_inv != 0ull || g->active > static_cast<unsigned long long>(capacity);
}

}  // namespace tessera::detail
