#pragma once
// Run-major traversal for Direct KV (c_q == 1, c_kv == 1, r_kv == 1, not packed), written by the streaming tile-row
// builder (launch_prep_rows_stream.cu) instead of launch_prep_run_major.cuh's general method. The order is still
// reorder_tile_row's (core/launch_prep_rules.hpp): maximal runs of consecutive entries, longest first, ties in
// ascending position, entries ascending inside a run. With Direct KV entry i of a row is its column i (kv tile = the
// column, membership bits 1), so a run of entries is a run of consecutive columns and its entries are the run's first
// column + 0, 1, ..., length - 1: once a run's destination is known, its entries are written without reading the
// columns again. A counting sort by length, per tile row, one warp:
//  1. direct_run_starts: one sweep over the columns (32 at a time) stores each run's start (its first entry) in the
//     row's run table, indexed by run, and counts the run lengths >= 2 as the runs end (match_any groups the lanes
//     that end runs of one length; the group's last lane adds the group's size), and finds the longest run.
//  2. direct_run_bases: a scan turns the counts into each length's first destination, base(L) = entries of the runs
//     longer than L. The longest runs start at 0.
//  3. direct_emit_runs: one pass over the run table: a run of length L and rank r among the earlier runs of length L
//     goes to base(L) + r L (match_any ranks the lanes of one length; the group's last lane advances base(L)); its
//     entries are written by its lane (short runs) or by the whole warp (longer runs).
// Three passes of one launch (the streaming kernel's), no per-length sweep. Space: the row's own span of the
// column-indexed run tables (RunTables, launch_prep_run_major.cuh), n words for n entries: the run starts in words
// [0, runs), the count of length L >= 2 in word n - L + 1 (later base(L - 1)); disjoint since every run holds at
// least one entry (runs - 1 + longest <= n).
#include <cstdint>

#include "core/launch_prep_rules.hpp"
#include "cuda/launch_prep_rows_stream.cuh"
#include "cuda/launch_prep_run_major.cuh"  // RunTables
#include "cuda/launch_prep_warp.cuh"

namespace tessera::prep::stream {

// Whether run-major rows of plan p are written by this file's method (Direct KV; c_q == 1 is the caller's).
TESSERA_HD inline bool direct_run_major(const PrepParams& p) { return p.c_kv == 1 && p.r_kv == 1 && p.pack == 0; }

// Runs and longest run (entries) of one tile row, kept between steps 2 and 3 (warp-uniform values).
struct DirectRuns {
  std::int32_t runs[kRowsPerCta], longest[kRowsPerCta];
};

// Length of run k < runs of a row with n entries whose run starts are tab[0 .. runs).
__device__ __forceinline__ std::int32_t direct_run_length(const std::int32_t* tab, std::int32_t k, std::int32_t runs,
                                                          std::int32_t n) {
  return (k + 1 < runs ? tab[k + 1] : n) - tab[k];
}

// Step 1: the start (entry = column - b) of every run of the row (columns [b, e), n = e - b > 0 entries) into
// tab[run], and the histogram of the run lengths L >= 2: H[L] in tab[n - L + 1] (the span is zeroed first); returns
// the number of runs and sets `longest` to the longest run's length (both warp-uniform). All lanes.
// Disjoint: a run start goes to a word below `runs`, and H[L] for a length L that occurs to n - L + 1 >= runs, since
// the other runs - 1 runs hold at least one entry each (runs - 1 + L <= n).
template <class Columns>
__device__ __forceinline__ std::int32_t direct_run_starts(Columns cols, std::int32_t b, std::int32_t e,
                                                          std::int32_t* tab, std::int32_t& longest) {
  const int lane = threadIdx.x % 32;
  const std::int32_t n = e - b;
  for (std::int32_t k = lane; k < n; k += 32) tab[k] = 0;
  __syncwarp();
  std::int32_t runs = 0;
  std::int32_t open = b;  // column of the last run start before the chunk
  std::int32_t len_max = 0;
  for (ColumnSweep<Columns> sw(cols, b, e, 0); sw.more(); sw.advance()) {
    sw.step();
    const std::int32_t i = sw.base + lane;
    const bool brk = i < e && !(sw.prev >= 0 && sw.prev + 1 == sw.c);  // row start, or not the previous column + 1
    const unsigned brks = __ballot_sync(kFull, brk);
    std::int32_t len = 0;  // the length of the run that ends before this lane's column (0: none)
    if (brk) {
      const unsigned below = brks & lanes_below(lane);
      tab[runs + __popc(below)] = i - b;
      len = i - (below ? sw.base + highest_lane(below) : open);  // 0 at the row's first column
      len_max = max(len_max, len);
    }
    const std::int32_t key = len >= 2 ? len : 0;
    const unsigned peers = __match_any_sync(kFull, key);  // the lanes that end runs of one length
    if (key > 0 && lane == highest_lane(peers)) tab[n - key + 1] += __popc(peers);
    __syncwarp();  // the next chunk's counts of the same length come after this one's
    if (brks) open = sw.base + highest_lane(brks);
    runs += __popc(brks);
  }
  const std::int32_t last = e - open;  // the last run ends at e
  if (lane == 0 && last >= 2) tab[n - last + 1] += 1;
  longest = warp_max(max(len_max, last));
  __syncwarp();
  return runs;
}

// Step 2: the histogram H[L] (tab[n - L + 1], L in [2, longest]) becomes the first destination of a run of each
// length L in [1, longest): base(L) = entries of the longer runs = sum over l in (L, longest] of l H[l], in
// tab[n - L] (the word that held H[L + 1]): an inclusive scan upwards from word n - longest + 1. All lanes.
__device__ __forceinline__ void direct_run_bases(std::int32_t* tab, std::int32_t longest, std::int32_t n) {
  const int lane = threadIdx.x % 32;
  std::int32_t below = 0;  // entries of the runs counted in the words before this chunk
  for (std::int32_t x0 = n - longest + 1; x0 < n; x0 += 32) {
    const std::int32_t x = x0 + lane;
    const std::int32_t w = x < n ? (n - x + 1) * tab[x] : 0;  // entries of the runs of length n - x + 1
    const std::int32_t incl = warp_exclusive_scan(w, lane) + w;
    if (x < n) tab[x] = below + incl;
    below += __shfl_sync(kFull, incl, 31);
  }
  __syncwarp();
}

// Runs longer than this are written by the whole warp, shorter ones by their own lane (two unrolled stores: random
// masks' runs are mostly of 1 or 2 entries; at 10 % density about 1 % are longer).
constexpr std::int32_t kLaneRun = 2;

// Step 3: the row's entries (n at o) in run-major order, from its run starts tab[0 .. runs) and bases (step 2; a run
// of the longest length starts after the earlier ones, from 0). Advances the bases. All lanes.
template <class Columns>
__device__ __forceinline__ void direct_emit_runs(const PrepParams& p, Columns cols, std::int32_t b, std::int32_t n,
                                                 std::int32_t* tab, std::int32_t runs, std::int32_t longest,
                                                 std::int64_t o, std::int32_t* __restrict__ kv_tile,
                                                 std::uint8_t* __restrict__ member) {
  const int lane = threadIdx.x % 32;
  std::int32_t* __restrict__ kv_row = kv_tile + o;
  const bool with_member = p.membership != 0;
  std::uint8_t* __restrict__ m_row = with_member ? member + o : nullptr;
  std::int32_t top = 0;  // destination of the next run of the longest length
  for (std::int32_t k0 = 0; k0 < runs; k0 += 32) {
    const std::int32_t k = k0 + lane;
    const bool valid = k < runs;
    std::int32_t v = 0, c0 = 0, dest = 0;
    if (valid) {
      const std::int32_t s = tab[k];
      v = direct_run_length(tab, k, runs, n);
      c0 = cols[b + s];  // the run's first column = its first entry's kv tile
    }
    const unsigned peers = __match_any_sync(kFull, v);  // lanes of one length (v = 0: past the table)
    const std::int32_t at_top = __popc(__ballot_sync(kFull, valid && v == longest));
    if (valid) dest = (v == longest ? top : tab[n - v]) + __popc(peers & lanes_below(lane)) * v;
    __syncwarp();  // every lane has read its base before the group's last lane advances it
    if (valid && v < longest && lane == highest_lane(peers)) tab[n - v] = dest + v;
    top += at_top * longest;
    if (valid && v <= kLaneRun) {
#pragma unroll
      for (std::int32_t t = 0; t < kLaneRun; ++t) {
        if (t < v) {
          kv_row[dest + t] = c0 + t;
          if (with_member) m_row[dest + t] = 1;  // c_q == 1, c_kv == 1: bit 0
        }
      }
    }
    for (unsigned wide = __ballot_sync(kFull, valid && v > kLaneRun); wide; wide &= wide - 1) {
      const int src = __ffs(wide) - 1;
      const std::int32_t d = __shfl_sync(kFull, dest, src), c = __shfl_sync(kFull, c0, src);
      const std::int32_t len = __shfl_sync(kFull, v, src);
      for (std::int32_t t = lane; t < len; t += 32) {
        kv_row[d + t] = c + t;
        if (with_member) m_row[d + t] = 1;
      }
    }
    __syncwarp();  // the advanced bases are visible to the next word's lanes
  }
}

// Warps 0 .. kWarps-1: steps 1 and 2 for the warp's rows (runs and longest run into dr).
template <class Columns>
__device__ __forceinline__ void plan_cta_direct_runs(Columns cs, const CtaRows& cr, RunTables tables, DirectRuns& dr) {
  for_warp_rows(cr, [&](int r, std::int32_t n) {
    std::int32_t* tab = tables.row(cr.b[r]);
    std::int32_t longest;
    const std::int32_t runs = direct_run_starts(cs, cr.b[r], cr.e[r], tab, longest);
    direct_run_bases(tab, longest, n);
    if (threadIdx.x % 32 == 0) dr.runs[r] = runs, dr.longest[r] = longest;
  });
}

// Warps 0 .. kWarps-1: step 3 for the warp's rows (kLookBack: at cr.first; else at mu(M)'s offsets).
template <bool kLookBack, class Columns>
__device__ __forceinline__ void emit_cta_direct_runs(const PrepParams& p, Columns cs, const CtaRows& cr,
                                                     RunTables tables, const DirectRuns& dr,
                                                     std::int32_t* __restrict__ kv_tile,
                                                     std::uint8_t* __restrict__ member) {
  for_warp_rows(cr, [&](int r, std::int32_t n) {
    const std::int64_t o = kLookBack ? cr.first[r] : cr.b[r];
    direct_emit_runs(p, cs, cr.b[r], n, tables.row(cr.b[r]), dr.runs[r], dr.longest[r], o, kv_tile, member);
  });
}

}  // namespace tessera::prep::stream
