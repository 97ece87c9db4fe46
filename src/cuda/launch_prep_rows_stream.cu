// Streaming GPU tile-row builder for plans whose tile rows are single logical rows (c_q == 1): Direct, Coarsened,
// Refined and packed KV, ascending or descending. Output is defined by core/launch_prep_rules.hpp (build_tile_row)
// and equals the CPU twins bit for bit; only the method differs from the bitmap builders:
//  - 32 consecutive tile rows per CTA, 2 per warp (16 warps): fewer CTAs than one row per warp and 4 per CTA, so
//    fewer look-back steps and atomics (on the H200 that form spent about half the kernel in the look-back), while
//    enough warps stay resident (8 rows per warp filled 0.7 of a wave). Any row length (no bitmap). The row's columns are sorted
//    and distinct, so a kv unit (c_kv adjacent blocks) is a run of consecutive columns: column i starts a unit when
//    i is the row's first or its unit differs from column i - 1's. The warp reads the columns 32 at a time; a
//    ballot of the unit starts gives every unit its rank in the row, so each unit's entries (span: rank * r_kv,
//    only the row's last unit can be ragged; packed: entry rank / pack, slot rank % pack) are written without a
//    scan or a bitmap.
//  - Entry counts: c_kv == 1 gives the units from the row length; otherwise a counting sweep over the columns
//    first. Offsets come from a decoupled look-back over the CTAs (launch_prep_lookback.cuh), or are mu(M)'s own
//    (Direct KV) with no look-back.
//  - Membership: span units OR 1 << (col % c_kv) over their (at most c_kv) columns; a packed entry with k units
//    has bits 0 .. k-1 (c_q == 1: one logical row).
#include <cuda_runtime.h>

#include "core/launch_prep_rules.hpp"
#include "cuda/check.cuh"
#include "cuda/launch_prep_kernels.cuh"
#include "cuda/launch_prep_lookback.cuh"
#include "cuda/launch_prep_warp.cuh"

namespace tessera::prep {

namespace {

using namespace detail;

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kRowsPerWarp = 2;
constexpr int kRowsPerCta = kWarps * kRowsPerWarp;  // 32: one per lane of the look-back warp
static_assert(kRowsPerCta == 32);

constexpr int kItems = 4;  // columns per lane per step (a blocked arrangement: 128 columns per warp step)

// A sweep over a row's columns [b, e) in steps of 128: lane L holds the 4 columns at base + 4L .. base + 4L + 3
// (base a multiple of 4, so whole rows inside the array load as aligned int4), and learns which of them start a
// kv unit: a column whose unit differs from the previous column's (the lane before's last column is shuffled in;
// lane 0 takes the previous step's lane 31, or "none" at the row start). Columns outside [b, e) read as -1.
struct ColumnSweep {
  const std::int32_t* __restrict__ cols;
  std::int32_t b, e, base;
  int log_ckv;
  bool vec;  // cols is 16-byte aligned: int4 loads for whole in-row quadruples
  std::int32_t c[kItems];
  std::int32_t carry = -1;  // column before the step (-1: none; its unit -1 differs from every unit)

  __device__ __forceinline__ ColumnSweep(const std::int32_t* __restrict__ cols_, std::int32_t b_, std::int32_t e_,
                                         int log_ckv_)
      : cols(cols_), b(b_), e(e_), base(b_ & ~3), log_ckv(log_ckv_),
        vec((reinterpret_cast<std::uintptr_t>(cols_) & 15) == 0) {}
  __device__ __forceinline__ bool more() const { return base < e; }
  /// Index of this lane's first column in the step.
  __device__ __forceinline__ std::int32_t first() const { return base + kItems * static_cast<std::int32_t>(threadIdx.x % 32); }
  __device__ __forceinline__ bool in_row(int k) const { return first() + k >= b && first() + k < e; }
  /// Loads the step at `base` and returns this lane's unit starts (bit k: column first() + k starts a unit).
  __device__ __forceinline__ unsigned step() {
    const int lane = threadIdx.x % 32;
    const std::int32_t i0 = first();
    if (vec && i0 >= b && i0 + kItems <= e) {
      const int4 v = __ldg(reinterpret_cast<const int4*>(cols + i0));
      c[0] = v.x, c[1] = v.y, c[2] = v.z, c[3] = v.w;
    } else {
#pragma unroll
      for (int k = 0; k < kItems; ++k) c[k] = i0 + k >= b && i0 + k < e ? __ldg(cols + i0 + k) : -1;
    }
    std::int32_t prev = __shfl_up_sync(kFull, c[kItems - 1], 1);
    if (lane == 0) prev = carry;
    carry = __shfl_sync(kFull, c[kItems - 1], 31);
    unsigned starts = 0;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      if (in_row(k) && (prev >> log_ckv) != (c[k] >> log_ckv)) starts |= 1u << k;
      prev = c[k];
    }
    return starts;
  }
  __device__ __forceinline__ void advance() { base += 32 * kItems; }
};

// Units of a row [b, e) (all lanes; warp-uniform result).
__device__ __forceinline__ std::int32_t row_unit_count(const std::int32_t* __restrict__ cols, std::int32_t b,
                                                       std::int32_t e, int log_ckv) {
  if (log_ckv == 0) return e - b;  // distinct columns: one unit each
  std::int32_t n = 0;
  for (ColumnSweep sw(cols, b, e, log_ckv); sw.more(); sw.advance()) n += __popc(sw.step());
  return warp_sum(n);
}

// Entries of tile row `row` (c_q == 1: logical row `row` of mu(M), columns [b, e)); all lanes, warp-uniform.
__device__ __forceinline__ std::int32_t row_entry_count(const UnitRules& ur, const std::int32_t* __restrict__ cols,
                                                        std::int32_t b, std::int32_t e, std::int32_t& n_units) {
  n_units = row_unit_count(cols, b, e, ur.log_ckv);
  if (ur.pack) return (n_units + ur.pack - 1) / ur.pack;
  std::int32_t n = n_units * ur.r_kv;
  if (n_units > 0 && (__ldg(cols + e - 1) >> ur.log_ckv) == ur.last_unit) n += ur.last_extra;
  return n;
}

// Writes the entries of one tile row (columns [b, e), n_units units, n_row entries at o; desc: reversed).
__device__ __forceinline__ void emit_row(const PrepParams& p, const UnitRules& ur, const std::int32_t* __restrict__ cols,
                                         std::int32_t b, std::int32_t e, std::int32_t n_units, std::int32_t n_row,
                                         std::int64_t o, int desc, std::int32_t* __restrict__ kv_tile,
                                         std::uint64_t* __restrict__ member, std::int32_t* __restrict__ gather) {
  const int lane = threadIdx.x % 32;
  const int log_ckv = ur.log_ckv;
  const int pack = ur.pack;
  const int log_rkv = log2_factor(ur.r_kv);
  const int log_pack = pack ? log2_factor(pack) : 0;
  const std::int32_t kj_mask = ur.c_kv - 1;  // a column's block inside its unit
  std::int32_t units_before = 0;
  for (ColumnSweep sw(cols, b, e, log_ckv); sw.more(); sw.advance()) {
    const unsigned starts = sw.step();
    const std::int32_t n_starts = __popc(starts);
    const std::int32_t excl = warp_exclusive_scan(n_starts, lane);  // units of the step before this lane's
    const std::int32_t i0 = sw.first();
    // Membership pieces (span, c_kv > 1): this lane's leading columns of one unit, for the lane before.
    std::int32_t lead_unit = -2, nb1_unit = -2, nb2_unit = -2;
    std::uint64_t lead_bits = 0, nb1_bits = 0, nb2_bits = 0;
    bool lead_all = false, nb1_all = false;
    const bool span_member = !pack && p.membership;  // warp-uniform
    if (span_member) {
      if (sw.in_row(0)) {
        lead_unit = sw.c[0] >> log_ckv;
        lead_all = true;
#pragma unroll
        for (int k = 0; k < kItems; ++k) {
          if (lead_all && sw.in_row(k) && (sw.c[k] >> log_ckv) == lead_unit)
            lead_bits |= std::uint64_t{1} << (sw.c[k] & kj_mask);
          else
            lead_all = false;
        }
      }
      nb1_unit = __shfl_down_sync(kFull, lead_unit, 1);
      nb1_bits = __shfl_down_sync(kFull, lead_bits, 1);
      nb1_all = __shfl_down_sync(kFull, lead_all, 1);
      nb2_unit = __shfl_down_sync(kFull, lead_unit, 2);
      nb2_bits = __shfl_down_sync(kFull, lead_bits, 2);
    }
#pragma unroll
    for (int ks = 0; ks < kItems; ++ks) {
      if (!((starts >> ks) & 1u)) continue;
      const std::int32_t c = sw.c[ks];
      const std::int32_t rank = units_before + excl + __popc(starts & ((1u << ks) - 1u));
      const std::int32_t unit = c >> log_ckv;
      if (!pack) {
        std::uint64_t bits = 0;
        if (span_member) {
          // OR of 1 << (col % c_kv) over the unit's (at most c_kv) columns: this lane's, then the next lanes'
          // leading pieces, then (a unit that runs past them) the columns themselves.
          bool done = false;
#pragma unroll
          for (int k = ks; k < kItems; ++k) {
            if (!done && sw.in_row(k) && (sw.c[k] >> log_ckv) == unit) bits |= std::uint64_t{1} << (sw.c[k] & kj_mask);
            else done = true;
          }
          std::int32_t nx = i0 + kItems;
          if (!done) {
            if (lane + 1 < 32 && nb1_unit == unit) {
              bits |= nb1_bits;
              if (nb1_all) nx += kItems;
              else done = true;
            } else if (lane + 1 < 32) {
              done = true;
            }
          }
          if (!done && nx == i0 + 2 * kItems) {
            if (lane + 2 < 32 && nb2_unit == unit) {
              bits |= nb2_bits;
              nx += kItems;
            } else if (lane + 2 < 32) {
              done = true;
            }
          }
          for (; !done && nx < e && nx < i0 + ks + ur.c_kv; ++nx) {
            const std::int32_t ck = __ldg(cols + nx);
            if ((ck >> log_ckv) != unit) break;
            bits |= std::uint64_t{1} << (ck & kj_mask);
          }
        } else if (p.membership) {
          bits = 1;  // not reached: span membership is handled above
        }
        const std::int32_t ne = ur.entries(unit);
        const std::int32_t first = rank << log_rkv;  // units before are whole (only the last one is ragged)
        for (std::int32_t j = 0; j < ne; ++j) {
          const std::int32_t kk = first + j;
          const std::int64_t d = o + (desc ? n_row - 1 - kk : kk);
          kv_tile[d] = unit * ur.r_kv + j;
          if (p.membership) member[d] = bits;
        }
      } else {
        const std::int32_t ent = rank >> log_pack, slot = rank & (pack - 1);
        const std::int64_t de = o + (desc ? n_row - 1 - ent : ent);
        gather[de * pack + slot] = unit;
        if (slot == 0) {
          const std::int32_t k = min(pack, n_units - rank);  // units of this entry
          if (p.membership) member[de] = (std::uint64_t{1} << k) - 1;
          for (std::int32_t s = k; s < pack; ++s) gather[de * pack + s] = -1;  // padding slots of the last entry
        }
      }
    }
    units_before += __shfl_sync(kFull, excl + n_starts, 31);
  }
}

// kRowsPerCta consecutive tile rows per CTA, kRowsPerWarp per warp: first every row's entry count, then (kLookBack)
// one look-back for the CTA's total, then the rows are written.
template <bool kLookBack>
__global__ void __launch_bounds__(kThreads, 2)
    rows_stream_kernel(PrepParams p, const std::int32_t* __restrict__ row_offsets, const std::int32_t* __restrict__ cols,
                       std::int32_t* __restrict__ tile_offsets, LookBackState lb, std::int32_t* __restrict__ kv_tile,
                       std::uint64_t* __restrict__ member, std::int32_t* __restrict__ gather, int desc) {
  __shared__ std::int32_t row_b[kRowsPerCta], row_e[kRowsPerCta], row_units[kRowsPerCta], row_entries[kRowsPerCta];
  __shared__ std::int32_t row_first[kRowsPerCta];  // kLookBack: the row's first entry
  __shared__ std::int32_t cta_ticket, cta_last;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const std::int32_t rows = static_cast<std::int32_t>(p.tile_rows());
  const std::int32_t tile = kLookBack ? lookback_ticket(lb, cta_ticket) : static_cast<std::int32_t>(blockIdx.x);
  const UnitRules ur(p);
  // The warp's kRowsPerWarp + 1 row offsets in one load (lane r: offset of row r0 + r), then one row at a time.
  const std::int32_t r0 = tile * kRowsPerCta + warp * kRowsPerWarp;
  const std::int32_t off = lane <= kRowsPerWarp && r0 + lane <= rows ? __ldg(row_offsets + r0 + lane) : 0;
#pragma unroll 1
  for (int k = 0; k < kRowsPerWarp; ++k) {
    const int r = warp * kRowsPerWarp + k;
    const std::int32_t row = r0 + k;
    const std::int32_t b = __shfl_sync(kFull, off, k), e = __shfl_sync(kFull, off, k + 1);
    std::int32_t units = 0, n = 0;
    if (row < rows) n = row_entry_count(ur, cols, b, e, units);  // warp-uniform; c_q == 1: logical row `row`
    if (lane == 0) row_b[r] = b, row_e[r] = e, row_units[r] = units, row_entries[r] = n;
  }
  if (kLookBack) {
    __syncthreads();
    if (warp == 0) {  // kRowsPerCta == 32: one row per lane
      const std::int32_t v = row_entries[lane];
      const std::int32_t excl = warp_exclusive_scan(v, lane);
      const std::int32_t total = __shfl_sync(kFull, excl + v, 31);
      const auto before = static_cast<std::int32_t>(lookback_exclusive(lb, tile, static_cast<std::uint64_t>(total)));
      row_first[lane] = before + excl;
      const std::int32_t row = tile * kRowsPerCta + lane;
      if (row < rows) tile_offsets[row] = before + excl;
      if (row == rows - 1) tile_offsets[rows] = before + excl + v;
    }
    __syncthreads();
    lookback_finish(lb, static_cast<std::int32_t>(gridDim.x), cta_last);
  } else {
    __syncwarp();
  }
#pragma unroll 1
  for (int r = warp * kRowsPerWarp; r < (warp + 1) * kRowsPerWarp; ++r) {
    const std::int32_t n = row_entries[r];
    if (n == 0) continue;
    const std::int64_t o = kLookBack ? row_first[r] : row_b[r];  // Direct KV: mu(M)'s offsets
    emit_row(p, ur, cols, row_b[r], row_e[r], row_units[r], n, o, desc, kv_tile, member, gather);
  }
}

}  // namespace

bool build_tile_rows_stream(const PrepParams& p, const std::int32_t* row_offsets, const std::int32_t* cols,
                            std::int32_t* tile_offsets, std::uint64_t* lookback, std::int32_t* kv_tile,
                            std::uint64_t* member, std::int32_t* gather, cudaStream_t stream) {
  const std::int64_t rows = p.tile_rows();
  if (rows == 0 || p.c_q != 1) return false;
  const auto ctas = static_cast<unsigned>((rows + kRowsPerCta - 1) / kRowsPerCta);  // <= the single-pass builder's
  const int desc = p.traversal == 1 ? 1 : 0;
  if (tile_offsets_are_mask_offsets(p)) {
    rows_stream_kernel<false><<<ctas, kThreads, 0, stream>>>(p, row_offsets, cols, nullptr, LookBackState{}, kv_tile,
                                                             member, gather, desc);
  } else {
    rows_stream_kernel<true><<<ctas, kThreads, 0, stream>>>(p, row_offsets, cols, tile_offsets,
                                                            detail::lookback_state(lookback), kv_tile, member, gather,
                                                            desc);
  }
  TESSERA_CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace tessera::prep
