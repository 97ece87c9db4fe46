// Streaming GPU tile-row builder for plans whose tile rows are single logical rows (c_q == 1): Direct, Coarsened,
// Refined and packed KV, in every traversal order (ascending, descending, run-major). Output is defined by
// core/launch_prep_rules.hpp (build_tile_row, reorder_tile_row) and equals the CPU twins bit for bit; only the method
// differs from the bitmap builders:
//  - 32 consecutive tile rows per CTA, 2 per warp (16 warps): fewer CTAs than one row per warp and 4 per CTA, so
//    fewer look-back steps and atomics (on the H200 that form spent about half the kernel in the look-back), while
//    enough warps stay resident (8 rows per warp filled 0.7 of a wave). Any row length (no bitmap). The row's
//    columns are sorted and distinct, so a kv unit (c_kv adjacent blocks) is a run of consecutive columns: column
//    i starts a unit when i is the row's first or its unit differs from column i - 1's. The warp reads the columns
//    32 at a time; a ballot of the unit starts gives every unit its rank in the row, so each unit's entries (span:
//    rank * r_kv, only the row's last unit can be ragged; packed: entry rank / pack, slot rank % pack) are written
//    without a scan or a bitmap.
//  - Entry counts: c_kv == 1 gives the units from the row length; otherwise a counting sweep over the columns
//    first. Offsets: mu(M)'s own (Direct KV); in linear orders row-aligned where the caller passes tile_ends
//    (r_kv times mu(M)'s offset, the row's end written: no look-back and no prefix over rows); else, and for
//    run-major, compact from a decoupled look-back over the CTAs (launch_prep_lookback.cuh).
//  - Membership: span units OR 1 << (col % c_kv) over their (at most c_kv) columns; a packed entry with k units
//    has bits 0 .. k-1 (c_q == 1: one logical row, so one-byte membership words, prep::member_bytes).
//  - Run-major traversal: written directly in its final order (launch_prep_run_major.cuh: each row's runs are found
//    and given their destinations while the counts are taken, then the emission maps every entry to its run);
//    Direct KV: launch_prep_run_major_direct.cuh, a counting sort of each row's runs by length that writes whole runs).
#include <cuda_runtime.h>

#include "core/launch_prep_rules.hpp"
#include "cuda/check.cuh"
#include "cuda/launch_prep_kernels.cuh"
#include "cuda/launch_prep_lookback.cuh"
#include "cuda/launch_prep_rows_stream.cuh"
#include "cuda/launch_prep_run_major.cuh"
#include "cuda/launch_prep_run_major_direct.cuh"
#include "tessera/error.hpp"

namespace tessera::prep {

namespace {

using namespace detail;
using namespace stream;

// Traversal orders of the kernel: ascending / descending (LinearOrder), run-major (launch_prep_run_major.cuh), and
// run-major for Direct KV (launch_prep_run_major_direct.cuh; its own kernel, so neither run-major method's registers
// constrain the other's).
enum class Order { kLinear, kRuns, kDirectRuns };

// The rows of one CTA (ticket `tile`): first every row's entry count (run-major: and its run table), then
// (kLookBack) one look-back for the CTA's total or (kAligned) each warp's row offsets and ends, then the rows are
// written. All threads. kMember == p.membership.
template <RowOffsets kOff, Order kOrder, bool kMember, class Columns>
__device__ __forceinline__ void rows_stream_cta(const PrepParams& p, const UnitRules& ur, std::int32_t tile,
                                                const std::int32_t* __restrict__ row_offsets, Columns cs,
                                                RunTables tables, std::int32_t* __restrict__ tile_offsets,
                                                std::int32_t* __restrict__ tile_ends, const LookBackState& lb,
                                                std::int32_t* __restrict__ kv_tile,
                                                std::uint8_t* __restrict__ member, std::int32_t* __restrict__ gather,
                                                int desc) {
  static_assert(kOff != RowOffsets::kAligned || kOrder == Order::kLinear, "row-aligned: linear orders only");
  constexpr bool kLookBack = kOff == RowOffsets::kLookBack;
  __shared__ CtaRows cr;
  __shared__ DirectRuns dr;  // Order::kDirectRuns: each row's runs and longest run
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const bool deferred = defer_count(kOff, ur, desc);
  count_cta_rows(p, ur, tile, kRowsPerCta, row_offsets, cs, cr, deferred);
  if constexpr (kOrder == Order::kRuns) {
    __syncwarp();
    plan_cta_runs(ur, cs, cr, tables);  // the warp's own rows: no CTA barrier needed before
  } else if constexpr (kOrder == Order::kDirectRuns) {
    __syncwarp();
    plan_cta_direct_runs(cs, cr, tables, dr);
  }
  if (kLookBack) {
    __syncthreads();
    if (warp == 0) {  // kRowsPerCta == 32: one row per lane
      const std::int32_t v = cr.entries[lane];
      const std::int32_t excl = warp_exclusive_scan(v, lane);
      const std::int32_t total = __shfl_sync(kFull, excl + v, 31);
      const auto before = static_cast<std::int32_t>(lookback_exclusive(lb, tile, static_cast<std::uint64_t>(total)));
      write_cta_row_offsets(cr, p, tile, kRowsPerCta, before, excl, v, tile_offsets);
    }
    __syncthreads();
    if (warp == 0) lookback_finish_warp(lb, static_cast<std::int32_t>(gridDim.x));  // the other warps go on
  } else {
    __syncwarp();
  }
  if constexpr (kOrder == Order::kRuns) {
    emit_cta_rows_run_major<kLookBack, kMember>(p, ur, cs, cr, tables, kv_tile, member, gather);
  } else if constexpr (kOrder == Order::kDirectRuns) {
    emit_cta_direct_runs<kLookBack>(p, cs, cr, tables, dr, kv_tile, member);
  } else {
    emit_cta_rows<kOff, kMember>(p, ur, cs, cr, desc, kv_tile, member, gather, deferred);
    if constexpr (kOff == RowOffsets::kAligned) {  // the warp's rows: offsets and ends (deferred counts included)
      __syncwarp();
      write_aligned_row_offsets(p, ur, cr, tile, kRowsPerCta, tile_offsets, tile_ends);
    }
  }
}

// kRowsPerCta consecutive tile rows per CTA, kRowsPerWarp per warp; their columns are read from a shared copy when
// it fits (stage_columns), else from global memory. Run-major (both methods): half the staged columns, and the
// other half of the shared memory holds the rows' run tables (launch_prep_run_major.cuh); with columns from global
// memory the run tables are `runs` (global scratch, mu(M)'s size). kMember == (p.membership != 0): the kernels
// without membership (Direct, Refined KV) have no member code (member is null for them).
template <RowOffsets kOff, Order kOrder, bool kMember>
__global__ void __launch_bounds__(kThreads, 3)
    rows_stream_kernel(PrepParams p, const std::int32_t* __restrict__ row_offsets,
                       const std::int32_t* __restrict__ cols, std::int32_t* __restrict__ tile_offsets,
                       std::int32_t* __restrict__ tile_ends, LookBackState lb, std::int32_t* __restrict__ kv_tile,
                       std::uint8_t* __restrict__ member, std::int32_t* __restrict__ gather,
                       std::int32_t* __restrict__ runs, int desc) {
  if (p.gated_off()) return;  // speculative preparation of a mask that did not pass (Runtime)
  constexpr bool kLookBack = kOff == RowOffsets::kLookBack;
  constexpr bool kRunMajor = kOrder != Order::kLinear;
  constexpr std::int32_t kCapacity = kRunMajor ? kStageCols / 2 : kStageCols;
  __shared__ alignas(16) std::int32_t stage[kCapacity];
  __shared__ std::int32_t run_tables[kRunMajor ? kCapacity : 1];
  __shared__ std::int32_t cta_ticket;
  const std::int32_t rows = static_cast<std::int32_t>(p.tile_rows());
  const std::int32_t tile = kLookBack ? lookback_ticket(lb, cta_ticket) : static_cast<std::int32_t>(blockIdx.x);
  const UnitRules ur(p);
  const std::int32_t cta_r0 = tile * kRowsPerCta;  // < rows: one CTA per kRowsPerCta rows
  std::int32_t first = 0;
  if (stage_columns<kCapacity>(cols, __ldg(row_offsets + cta_r0),
                               __ldg(row_offsets + min(cta_r0 + kRowsPerCta, rows)), stage, first)) {
    rows_stream_cta<kOff, kOrder, kMember>(p, ur, tile, row_offsets, SharedColumns{stage, first},
                                           RunTables{run_tables, first}, tile_offsets, tile_ends, lb, kv_tile,
                                           member, gather, desc);
  } else {
    rows_stream_cta<kOff, kOrder, kMember>(p, ur, tile, row_offsets, GlobalColumns{cols}, RunTables{runs, 0},
                                           tile_offsets, tile_ends, lb, kv_tile, member, gather, desc);
  }
}

// Only the offsets each order meets are instantiated: Direct-KV run-major (kDirectRuns) has mu(M)'s offsets
// (direct_run_major(p) == tile_offsets_are_mask_offsets(p) when c_q == 1), other run-major rows (kRuns) the look-back;
// linear orders any of the three.
template <Order kOrder>
void launch_rows_stream(const PrepParams& p, unsigned ctas, const std::int32_t* row_offsets, const std::int32_t* cols,
                        std::int32_t* tile_offsets, std::int32_t* tile_ends, std::uint64_t* lookback,
                        std::int32_t* kv_tile, std::uint8_t* member, std::int32_t* gather, std::int32_t* runs,
                        int desc, cudaStream_t stream) {
  constexpr RowOffsets kLb = RowOffsets::kLookBack;
  if constexpr (kOrder != Order::kRuns) {
    if (tile_offsets_are_mask_offsets(p)) {  // Direct KV: no membership (c_q == c_kv == 1, not packed)
      rows_stream_kernel<RowOffsets::kMask, kOrder, false><<<ctas, kThreads, 0, stream>>>(
          p, row_offsets, cols, nullptr, nullptr, LookBackState{}, kv_tile, nullptr, gather, runs, desc);
      return;
    }
  }
  if constexpr (kOrder == Order::kLinear) {
    if (tile_ends != nullptr) {  // row-aligned: no look-back
      constexpr RowOffsets kAl = RowOffsets::kAligned;
      if (p.membership) {
        rows_stream_kernel<kAl, kOrder, true><<<ctas, kThreads, 0, stream>>>(
            p, row_offsets, cols, tile_offsets, tile_ends, LookBackState{}, kv_tile, member, gather, runs, desc);
      } else {
        rows_stream_kernel<kAl, kOrder, false><<<ctas, kThreads, 0, stream>>>(
            p, row_offsets, cols, tile_offsets, tile_ends, LookBackState{}, kv_tile, nullptr, gather, runs, desc);
      }
      return;
    }
  }
  if constexpr (kOrder == Order::kDirectRuns) {
    throw Error(ErrorCode::kInternal, "plan", "Direct-KV run-major rows without mu(M)'s offsets");
  } else {
    if (p.membership) {  // Coarsened or packed KV
      rows_stream_kernel<kLb, kOrder, true><<<ctas, kThreads, 0, stream>>>(
          p, row_offsets, cols, tile_offsets, nullptr, detail::lookback_state(lookback), kv_tile, member, gather,
          runs, desc);
    } else {  // Refined KV
      rows_stream_kernel<kLb, kOrder, false><<<ctas, kThreads, 0, stream>>>(
          p, row_offsets, cols, tile_offsets, nullptr, detail::lookback_state(lookback), kv_tile, nullptr, gather,
          runs, desc);
    }
  }
}

}  // namespace

bool build_tile_rows_stream(const PrepParams& p, const std::int32_t* row_offsets, const std::int32_t* cols,
                            std::int32_t* tile_offsets, std::int32_t* tile_ends, std::uint64_t* lookback,
                            std::int32_t* kv_tile, std::uint8_t* member, std::int32_t* gather, std::int32_t* runs,
                            cudaStream_t stream) {
  const std::int64_t rows = p.tile_rows();
  if (rows == 0 || p.c_q != 1) return false;
  const auto ctas = static_cast<unsigned>((rows + kRowsPerCta - 1) / kRowsPerCta);  // <= the single-pass builder's
  const int desc = p.traversal == 1 ? 1 : 0;
  if (p.traversal == 2 && direct_run_major(p)) {
    launch_rows_stream<Order::kDirectRuns>(p, ctas, row_offsets, cols, tile_offsets, nullptr, lookback, kv_tile,
                                           member, gather, runs, desc, stream);
  } else if (p.traversal == 2) {  // compact: the run-major emission needs the look-back
    launch_rows_stream<Order::kRuns>(p, ctas, row_offsets, cols, tile_offsets, nullptr, lookback, kv_tile, member,
                                     gather, runs, desc, stream);
  } else {
    launch_rows_stream<Order::kLinear>(p, ctas, row_offsets, cols, tile_offsets, tile_ends, lookback, kv_tile,
                                       member, gather, runs, desc, stream);
  }
  TESSERA_CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace tessera::prep
