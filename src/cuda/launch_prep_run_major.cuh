#pragma once
// Run-major traversal written by the streaming tile-row builder itself (c_q == 1; launch_prep_rows_stream.cu), with
// no ascending copy in scratch and no reorder launch. The order is reorder_tile_row's (core/launch_prep_rules.hpp):
// maximal runs of consecutive entries, longest first, ties in ascending position, entries ascending inside a run.
// Per tile row, one warp:
//  1. run_lengths: a sweep over the row's columns (32 at a time, as the emission) finds the runs. With c_q == 1 a
//     run of entries is a run of consecutive units (a column starts a run when its unit is not the previous column's
//     unit + 1): span forms' units give r_kv consecutive tiles each, and unit u + 1's first tile follows unit u's
//     last; a packed entry continues the previous one when its first unit (rank a multiple of pack) follows the
//     previous unit. Each run's length in entries (the distance between consecutive run starts) goes to the row's
//     run table, indexed by run.
//  2. run_destinations: the table's lengths become destinations, one sweep over the table per distinct length
//     (longest first; ballot ranks keep ascending order among runs of one length). Random masks have short runs
//     (10 %: lengths 1-4, ~4 sweeps over ~4 words of 32 runs).
//  3. emit_row with RunOrder: the emission sweep of the ascending order (launch_prep_rows_stream.cuh) again; every
//     chunk maps each lane to its run (ballot of run starts at or below it, or the run continued from the previous
//     chunk) and entry k of run r goes to destination(r) + k - start(r).
// The run table holds at most one word per run, and a row has at most as many runs as columns, so a row's table fits
// in the row's own span of a column-indexed array: the staged columns' twin in shared memory, or a scratch array of
// mu(M)'s size in global memory when the columns are not staged.
#include <cstdint>

#include "core/launch_prep_rules.hpp"
#include "cuda/launch_prep_rows_stream.cuh"
#include "cuda/launch_prep_warp.cuh"

namespace tessera::prep::stream {

// Lanes at or below `lane`.
__device__ __forceinline__ unsigned lanes_up_to(int lane) { return (2u << lane) - 1u; }  // lane 31: all (wraps)

// For the chunk that `sw` just stepped (start: the lane's column starts a unit; starts: their ballot; units_before:
// units of the row before the chunk): whether the lane's column starts a run of entries, and (entry) the first entry
// of its unit. log_pack: log2 pack (packed forms). The row's first column has sw.prev == -1 (no column before).
template <class Sweep>
__device__ __forceinline__ bool run_break(const UnitRules& ur, const Sweep& sw, bool start, unsigned starts,
                                          std::int32_t units_before, int log_pack, std::int32_t& entry) {
  const int lane = threadIdx.x % 32;
  const std::int32_t rank = units_before + __popc(starts & lanes_below(lane));
  entry = ur.pack ? rank >> log_pack : rank * ur.r_kv;
  const bool adjacent = sw.prev >= 0 && (sw.prev >> ur.log_ckv) + 1 == (sw.c >> ur.log_ckv);
  return start && !adjacent && (ur.pack == 0 || (rank & (ur.pack - 1)) == 0);
}

// Step 1: the length (entries) of every run of the row (columns [b, e), n_row > 0 entries) into tab[run]; returns
// the number of runs and sets longest to the longest run (both warp-uniform). All lanes.
template <class Columns>
__device__ __forceinline__ std::int32_t run_lengths(const UnitRules& ur, Columns cols, std::int32_t b, std::int32_t e,
                                                    std::int32_t n_row, std::int32_t* tab, std::int32_t& longest) {
  const int lane = threadIdx.x % 32;
  const int log_pack = ur.pack ? log2_factor(ur.pack) : 0;
  std::int32_t runs = 0, units_before = 0;
  std::int32_t open = 0;  // first entry of the last run started before this chunk
  std::int32_t len_max = 0;
  for (ColumnSweep<Columns> sw(cols, b, e, ur.log_ckv); sw.more(); sw.advance()) {
    const bool start = sw.step();
    const unsigned starts = __ballot_sync(kFull, start);
    std::int32_t entry;
    const bool brk = run_break(ur, sw, start, starts, units_before, log_pack, entry);
    const unsigned brks = __ballot_sync(kFull, brk);
    const int below = highest_lane(brks & lanes_below(lane));  // the run start before this lane's, in this chunk
    const std::int32_t from = __shfl_sync(kFull, entry, below < 0 ? 0 : below);
    if (brk) {
      const std::int32_t run = runs + __popc(brks & lanes_below(lane));
      if (run > 0) {  // the previous run ends here
        const std::int32_t len = entry - (below < 0 ? open : from);
        tab[run - 1] = len;
        len_max = max(len_max, len);
      }
    }
    if (brks) open = __shfl_sync(kFull, entry, highest_lane(brks));
    runs += __popc(brks);
    units_before += __popc(starts);
  }
  if (lane == 0) {
    tab[runs - 1] = n_row - open;
    len_max = max(len_max, n_row - open);
  }
  longest = warp_max(len_max);
  __syncwarp();
  return runs;
}

// Step 2: replaces the lengths tab[0 .. runs) by ~destination (the run's first entry in run-major order, from the
// row's start; negative, so assigned runs are told from lengths >= 1): runs by decreasing length, runs of one length
// in ascending order. One sweep per distinct length, from `longest` down. All lanes.
__device__ __forceinline__ void run_destinations(std::int32_t* tab, std::int32_t runs, std::int32_t longest) {
  const int lane = threadIdx.x % 32;
  std::int32_t out = 0;
  for (std::int32_t len = longest; len > 0;) {
    std::int32_t shorter = 0;  // the longest unassigned run below len
    for (std::int32_t k0 = 0; k0 < runs; k0 += 32) {
      const std::int32_t k = k0 + lane;
      const std::int32_t v = k < runs ? tab[k] : 0;
      const bool sel = v == len;
      if (v < len) shorter = max(shorter, v);
      const unsigned bal = __ballot_sync(kFull, sel);
      if (sel) tab[k] = ~(out + __popc(bal & lanes_below(lane)) * len);
      out += __popc(bal) * len;
    }
    len = warp_max(shorter);
  }
  __syncwarp();
}

// Step 3, the order emit_row writes in: entry k of the row goes to k + delta, where delta = destination - first entry
// of the lane's run (set by chunk() for the chunk just stepped).
struct RunOrder {
  const std::int32_t* tab;  ///< the row's run destinations (run_destinations)
  int log_pack;
  std::int32_t runs_before = 0;  ///< runs started before the chunk
  std::int32_t open_delta = 0;   ///< delta of the last run started before the chunk
  std::int32_t delta = 0;

  template <class Sweep>
  __device__ __forceinline__ void chunk(const UnitRules& ur, const Sweep& sw, bool start, unsigned starts,
                                        std::int32_t units_before) {
    const int lane = threadIdx.x % 32;
    std::int32_t entry;
    const bool brk = run_break(ur, sw, start, starts, units_before, log_pack, entry);
    const unsigned brks = __ballot_sync(kFull, brk);
    std::int32_t d = 0;
    if (brk) d = ~tab[runs_before + __popc(brks & lanes_below(lane))] - entry;
    const int src = highest_lane(brks & lanes_up_to(lane));  // the lane's run starts there, or before the chunk
    const std::int32_t from = __shfl_sync(kFull, d, src < 0 ? 0 : src);
    delta = src < 0 ? open_delta : from;
    if (brks) open_delta = __shfl_sync(kFull, d, highest_lane(brks));
    runs_before += __popc(brks);
  }
  __device__ __forceinline__ std::int32_t at(std::int32_t k) const { return k + delta; }
};

// Where a row's run table lives: column c of mu(M) has word c - shift of `base` (the staged columns' twin in shared
// memory, shift = the first staged column; or global scratch of mu(M)'s size, shift = 0).
struct RunTables {
  std::int32_t* base;
  std::int32_t shift;
  __device__ __forceinline__ std::int32_t* row(std::int32_t b) const { return base + (b - shift); }
};

// Warps 0 .. kWarps-1, run-major traversal: steps 1 and 2 for the warp's rows (before the entry offsets are known).
// (Direct KV has its own method: launch_prep_run_major_direct.cuh.)
template <class Columns>
__device__ __forceinline__ void plan_cta_runs(const UnitRules& ur, Columns cs, const CtaRows& cr, RunTables tables) {
  for_warp_rows(cr, [&](int r, std::int32_t n) {
    std::int32_t* tab = tables.row(cr.b[r]);
    std::int32_t longest;
    const std::int32_t runs = run_lengths(ur, cs, cr.b[r], cr.e[r], n, tab, longest);
    run_destinations(tab, runs, longest);
  });
}

// Warps 0 .. kWarps-1, run-major traversal: step 3 for the warp's rows (kLookBack: at cr.first; else at mu(M)'s
// offsets, Direct KV); kMember == (p.membership != 0).
template <bool kLookBack, bool kMember, class Columns>
__device__ __forceinline__ void emit_cta_rows_run_major(const PrepParams& p, const UnitRules& ur, Columns cs,
                                                        const CtaRows& cr, RunTables tables,
                                                        std::int32_t* __restrict__ kv_tile,
                                                        std::uint8_t* __restrict__ member,  // c_q == 1: 1 byte
                                                        std::int32_t* __restrict__ gather) {
  const int log_pack = ur.pack ? log2_factor(ur.pack) : 0;
  for_warp_rows(cr, [&](int r, std::int32_t) {
    const std::int64_t o = kLookBack ? cr.first[r] : cr.b[r];
    emit_row<kMember, false>(p, ur, cs, cr.b[r], cr.e[r], cr.units[r], o, RunOrder{tables.row(cr.b[r]), log_pack},
                             kv_tile, member, gather);
  });
}

}  // namespace tessera::prep::stream
