// Single-pass GPU tile-row builder (span forms): every tile row's entries and membership, and the tile-row
// offsets, in one launch that reads mu(M)'s columns once. Output is defined by core/launch_prep_rules.hpp
// (build_tile_row, reorder_tile_row for desc) and equals the CPU twins bit for bit; only the method differs:
//  - One warp per tile row, 4 rows per CTA. The warp loads all columns of the row's c_q logical rows (contiguous
//    in mu(M)'s CSR) with independent coalesced loads, 4 per lane in flight, and sets them in a bitmap of the
//    whole row in shared memory (one ceil(n_kvb / 32)-word bitmap per logical row; union for Coarsened-Q).
//  - The row's entry count is a popcount over the bitmap's group heads. The CTA sums its 4 rows and takes its
//    first entry from a decoupled look-back over the CTAs (launch_prep_lookback.cuh); it writes its rows'
//    tile_offsets (the last row also tile_offsets[rows]). No count pass, no scan launch.
//  - Emission from the bitmap, 32 entries at a time with one entry per lane (each lane finds its entry's word,
//    unit and offset from a warp scan of the per-word counts), stored coalesced. Descending traversal is the
//    index permutation n - 1 - k.
// Used for c_q > 1 (c_q == 1 goes to the streaming builder, launch_prep_rows_stream.cu); packed KV with c_q > 1
// uses the two-pass builder.
// Rows whose bitmaps do not fit (4 * c_q * ceil(n_kvb / 32) words > 32 KB: n_kvb > 8,192 at c_q = 8, > 16,384 at
// c_q = 4, > 32,768 at c_q = 2, > 65,536 at c_q = 1) use the two-pass builder in
// launch_prep_tiles.cu. With known offsets (Direct KV: mu(M)'s own) the look-back is skipped.
#include <cuda_runtime.h>

#include <climits>

#include "core/launch_prep_rules.hpp"
#include "cuda/check.cuh"
#include "cuda/launch_prep_kernels.cuh"
#include "cuda/launch_prep_lookback.cuh"
#include "cuda/launch_prep_warp.cuh"

namespace tessera::prep {

namespace {

using namespace detail;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kLoadDepth = 4;                  // column loads in flight per lane
// CTAs per SM the register budget must allow: 12 (40 registers).
constexpr int kMinCtasSpan = 12;
// Bitmap bytes per CTA (dynamic shared memory), below the 48 KB that needs no opt-in.
constexpr std::int64_t kMaxSmemBytes = 32 * 1024;

// One tile row's bitmaps in shared memory: bm[qi * words + w], bit b = block w * 32 + b of logical row qi.
struct RowBitmap {
  std::uint32_t* bm;
  std::int32_t words;
  int nq;  // logical rows of this tile row (c_q, fewer for a head's last tile row)

  __device__ __forceinline__ std::uint32_t word(int qi, std::int32_t w) const { return bm[qi * words + w]; }
  __device__ __forceinline__ std::uint32_t union_word(std::int32_t w) const {
    std::uint32_t u = 0;
    for (int qi = 0; qi < nq; ++qi) u |= word(qi, w);
    return u;
  }
};

// Fills the warp's bitmap with tile row `row` (all lanes). bounds: the warp's kMaxMappingFactor + 1 shared ints.
__device__ __forceinline__ int load_row(const PrepParams& p, const std::int32_t* __restrict__ row_offsets,
                                       const std::int32_t* __restrict__ cols, std::int32_t row, std::uint32_t* bm,
                                       std::int32_t words, std::int32_t* bounds) {
  const int lane = threadIdx.x % 32;
  const std::int32_t rph = static_cast<std::int32_t>(p.rows_per_head);
  const std::int32_t n_qb = static_cast<std::int32_t>(p.n_qb);
  const std::int32_t mh = row / rph;
  const std::int32_t t = row - mh * rph;
  const int nq = min(p.c_q, n_qb - t * p.c_q);  // >= 1: t < ceil(n_qb / c_q)
  const std::int64_t lr0 = static_cast<std::int64_t>(mh) * n_qb + static_cast<std::int64_t>(t) * p.c_q;
  if (lane <= nq) bounds[lane] = __ldg(row_offsets + lr0 + lane);
  for (std::int32_t i = lane; i < nq * words; i += 32) bm[i] = 0;
  __syncwarp();
  // The nq logical rows' columns are contiguous in cols: [bounds[0], bounds[nq]).
  const std::int32_t b = bounds[0], e = bounds[nq];
  std::int32_t bnd[kMaxMappingFactor];  // ends of logical rows 0 .. nq - 2 (registers: read per column below)
#pragma unroll
  for (int q = 1; q < kMaxMappingFactor; ++q) bnd[q - 1] = q < nq ? bounds[q] : INT_MAX;
  for (std::int32_t base = b + lane; base < e; base += kLoadDepth * 32) {
    std::int32_t v[kLoadDepth];
#pragma unroll
    for (int k = 0; k < kLoadDepth; ++k) v[k] = base + k * 32 < e ? __ldg(cols + base + k * 32) : -1;
#pragma unroll
    for (int k = 0; k < kLoadDepth; ++k) {
      if (v[k] < 0) continue;
      const std::int32_t idx = base + k * 32;
      int qi = 0;
#pragma unroll
      for (int q = 0; q < kMaxMappingFactor - 1; ++q) qi += idx >= bnd[q];
      atomicOr(bm + qi * words + (v[k] >> 5), 1u << (v[k] & 31));
    }
  }
  __syncwarp();
  return nq;
}

// Entries of the row in the bitmap (warp-uniform result).
__device__ __forceinline__ std::int32_t count_row(const UnitRules& ur, const RowBitmap& r) {
  std::int32_t n = 0;
  for (std::int32_t w = threadIdx.x % 32; w < r.words; w += 32)
    n += ur.count(group_heads(r.union_word(w), ur.c_kv), w * 32);
  return warp_sum(n);  // span forms only (no packing)
}

// Membership bits of the span unit whose head is bit b of word w: bits qi * 8 + kj of its c_kv blocks.
__device__ __forceinline__ std::uint64_t span_bits(const UnitRules& ur, const RowBitmap& r, std::int32_t w, int b) {
  std::uint64_t bits = 0;
  for (int qi = 0; qi < r.nq; ++qi)
    bits |= static_cast<std::uint64_t>((r.word(qi, w) >> b) & ur.group_mask) << (qi * 8);
  return bits;
}

// Span forms: entries of the row at o .. o + n_row (desc: reversed). For each stretch of 32 words, lane L owns word
// w0 + L, and a warp scan of the per-word entry counts gives each word's first entry. The stretch's entries are
// then expanded 32 at a time with one entry per lane: lane L takes entry e = base + L, finds the word that holds it
// (binary search over the scanned counts with shuffles), the unit inside the word (the n-th group head, __fns) and
// the entry inside the unit, and stores it. Consecutive lanes store consecutive entries (coalesced, ascending or
// descending addresses); no lane loops over its own word's entries, so the warp does not diverge.
__device__ __forceinline__ void emit_span_row(const PrepParams& p, const UnitRules& ur, const RowBitmap& r,
                                              std::int64_t o, std::int32_t n_row, int desc,
                                              std::int32_t* __restrict__ kv_tile, std::uint64_t* __restrict__ member) {
  const int lane = threadIdx.x % 32;
  const RefineDivider rd(ur.r_kv);
  std::int32_t done = 0;  // entries of the row before this stretch
  for (std::int32_t w0 = 0; w0 < r.words; w0 += 32) {
    const std::int32_t w = w0 + lane;
    const std::uint32_t u = w < r.words ? r.union_word(w) : 0u;
    if (__ballot_sync(kFull, u != 0) == 0) continue;  // warp-uniform: no block in these 32 words
    const std::uint32_t heads = group_heads(u, ur.c_kv);
    const std::int32_t count = ur.count(heads, w * 32);
    const std::int32_t first = warp_exclusive_scan(count, lane);  // the lane's first entry in the stretch
    const std::int32_t total = __shfl_sync(kFull, first + count, 31);
    for (std::int32_t base = 0; base < total; base += 32) {
      const std::int32_t e = base + lane;
      const int owner = warp_owner_lane(first, e);
      const std::int32_t k = e - __shfl_sync(kFull, first, owner);  // entry inside the owner's word
      const std::uint32_t h = __shfl_sync(kFull, heads, owner);
      if (e >= total) continue;
      // Units before the ragged last one have r_kv entries each, and the last unit is the word's last head.
      const int b = __fns(h, 0, rd.div(k) + 1);
      const std::int32_t ow = w0 + owner;
      const std::int32_t unit = (ow * 32 + b) >> ur.log_ckv;
      const std::int32_t j = rd.mod(k);
      const std::int32_t kk = done + e;
      const std::int64_t d = o + (desc ? n_row - 1 - kk : kk);
      kv_tile[d] = unit * ur.r_kv + j;
      if (p.membership) member[d] = span_bits(ur, r, ow, b);
    }
    done += total;
  }
}

// kLookBack: entry offsets from the look-back, written to tile_offsets. Otherwise the tile rows are mu(M)'s rows
// (Direct KV, c_q == 1): their offsets are row_offsets, and tile_offsets and lb are unused. Span forms only
// (p.pack == 0: tile_rows_single_pass_fits).
template <bool kLookBack>
__global__ void __launch_bounds__(kThreads, kMinCtasSpan)
    rows_single_pass_kernel(PrepParams p, const std::int32_t* __restrict__ row_offsets,
                            const std::int32_t* __restrict__ cols, std::int32_t* __restrict__ tile_offsets,
                            LookBackState lb, std::int32_t words, std::int32_t* __restrict__ kv_tile,
                            std::uint64_t* __restrict__ member, int desc) {
  extern __shared__ std::uint32_t bitmaps[];  // [kWarps][c_q][words]
  __shared__ std::int32_t bounds[kWarps][kMaxMappingFactor + 1];
  __shared__ std::int32_t row_entries[kWarps];
  __shared__ std::int32_t cta_ticket, cta_base;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const std::int32_t rows = static_cast<std::int32_t>(p.tile_rows());
  const std::int32_t tile = kLookBack ? lookback_ticket(lb, cta_ticket) : static_cast<std::int32_t>(blockIdx.x);
  const std::int32_t row = tile * kWarps + warp;
  const bool has_row = row < rows;  // warp-uniform
  const UnitRules ur(p);
  RowBitmap r{bitmaps + warp * p.c_q * words, words, 0};
  std::int32_t n_row = 0;
  if (has_row) {
    r.nq = load_row(p, row_offsets, cols, row, r.bm, words, bounds[warp]);
    n_row = count_row(ur, r);
  }
  std::int64_t o = 0;
  if (kLookBack) {
    if (lane == 0) row_entries[warp] = n_row;
    __syncthreads();
    if (warp == 0) {
      const std::int32_t total = warp_sum(lane < kWarps ? row_entries[lane] : 0);
      const std::uint64_t before = lookback_exclusive(lb, tile, static_cast<std::uint64_t>(total));
      if (lane == 0) cta_base = static_cast<std::int32_t>(before);
    }
    __syncthreads();
    o = cta_base;
    for (int k = 0; k < warp; ++k) o += row_entries[k];
    if (has_row && lane == 0) {
      tile_offsets[row] = static_cast<std::int32_t>(o);
      if (row == rows - 1) tile_offsets[rows] = static_cast<std::int32_t>(o + n_row);
    }
    if (warp == 0) lookback_finish_warp(lb, static_cast<std::int32_t>(gridDim.x));  // the other warps go on
  } else if (has_row) {
    o = row_offsets[row];  // tile rows are mu(M)'s rows (tile_offsets is unused)
  }
  if (!has_row || n_row == 0) return;
  emit_span_row(p, ur, r, o, n_row, desc, kv_tile, member);
}

std::int32_t bitmap_words(const PrepParams& p) { return static_cast<std::int32_t>((p.n_kvb + 31) / 32); }

std::int64_t smem_bytes(const PrepParams& p) { return std::int64_t{kWarps} * p.c_q * bitmap_words(p) * 4; }

}  // namespace

std::int64_t tile_rows_lookback_words(const PrepParams& p) {
  return detail::lookback_words((p.tile_rows() + kWarps - 1) / kWarps);
}

// Packed KV stays on the two-pass builder: on the H200 (Wan2.1 720p Q64K64, bench_launch_prep at 5f48252) the
// one-pass packed emission took 214 / 256 / 309 us for kv64p2 / p4 / p8 against 160 us for the two-pass
// builder (bench/NOTES.md, "Launch preparation, third pass"); that emission was removed (it is in git history at
// d5a7fbb, src/cuda/launch_prep_rows_single_pass.cu, for a rework).
bool tile_rows_single_pass_fits(const PrepParams& p) {
  return p.c_q == 1 || (!p.pack && smem_bytes(p) <= kMaxSmemBytes);  // c_q == 1: launch_prep_rows_stream.cu
}

bool build_tile_rows_single_pass(const PrepParams& p, const std::int32_t* row_offsets, const std::int32_t* cols,
                                 std::int32_t* tile_offsets, std::uint64_t* lookback, std::int32_t* kv_tile,
                                 std::uint64_t* member, cudaStream_t stream) {
  const std::int64_t rows = p.tile_rows();
  if (rows == 0 || p.pack || smem_bytes(p) > kMaxSmemBytes) return false;
  const auto ctas = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
  const int desc = p.traversal == 1 ? 1 : 0;
  const auto smem = static_cast<std::size_t>(smem_bytes(p));
  if (tile_offsets_are_mask_offsets(p)) {
    rows_single_pass_kernel<false><<<ctas, kThreads, smem, stream>>>(
        p, row_offsets, cols, nullptr, LookBackState{}, bitmap_words(p), kv_tile, member, desc);
  } else {
    rows_single_pass_kernel<true><<<ctas, kThreads, smem, stream>>>(p, row_offsets, cols, tile_offsets,
                                                                    detail::lookback_state(lookback),
                                                                    bitmap_words(p), kv_tile, member, desc);
  }
  TESSERA_CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace tessera::prep
