// Streaming GPU tile-row builder for plans whose tile rows are single logical rows (c_q == 1): Direct, Coarsened,
// Refined and packed KV, ascending or descending. Output is defined by core/launch_prep_rules.hpp (build_tile_row)
// and equals the CPU twins bit for bit; only the method differs from the bitmap builders:
//  - 32 consecutive tile rows per CTA, 2 per warp (16 warps): fewer CTAs than one row per warp and 4 per CTA, so
//    fewer look-back steps and atomics (on the H200 that form spent about half the kernel in the look-back), while
//    enough warps stay resident (8 rows per warp filled 0.7 of a wave). Any row length (no bitmap). The row's
//    columns are sorted and distinct, so a kv unit (c_kv adjacent blocks) is a run of consecutive columns: column
//    i starts a unit when i is the row's first or its unit differs from column i - 1's. The warp reads the columns
//    32 at a time; a ballot of the unit starts gives every unit its rank in the row, so each unit's entries (span:
//    rank * r_kv, only the row's last unit can be ragged; packed: entry rank / pack, slot rank % pack) are written
//    without a scan or a bitmap.
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

// A sweep over a row's columns [b, e), 32 at a time (lane L holds column base + L), that tells each lane whether
// its column starts a kv unit: its unit differs from the previous column's (shuffled from the lane before; lane 0
// takes the previous chunk's lane 31, or "none" at the row start). The next chunk is loaded before the current one
// is used, so two loads per lane are in flight.
struct ColumnSweep {
  const std::int32_t* __restrict__ cols;
  std::int32_t base, e;
  int log_ckv;
  std::int32_t c = 0, next = 0;
  std::int32_t carry = -1;  // column before the chunk (-1: none; its unit -1 differs from every unit)

  __device__ __forceinline__ ColumnSweep(const std::int32_t* __restrict__ cols_, std::int32_t b, std::int32_t e_,
                                         int log_ckv_)
      : cols(cols_), base(b), e(e_), log_ckv(log_ckv_) {
    const std::int32_t i = b + threadIdx.x % 32;
    next = i < e ? __ldg(cols + i) : 0;
  }
  __device__ __forceinline__ bool more() const { return base < e; }
  /// Takes the chunk at `base` (prefetching the next) and returns whether this lane's column starts a unit.
  __device__ __forceinline__ bool step() {
    const int lane = threadIdx.x % 32;
    c = next;
    const std::int32_t i = base + lane;
    if (base + 32 < e) next = i + 32 < e ? __ldg(cols + i + 32) : 0;
    std::int32_t prev = __shfl_up_sync(kFull, c, 1);
    if (lane == 0) prev = carry;
    carry = __shfl_sync(kFull, c, 31);
    return i < e && (prev >> log_ckv) != (c >> log_ckv);
  }
  __device__ __forceinline__ void advance() { base += 32; }
  __device__ __forceinline__ bool valid() const { return base + static_cast<std::int32_t>(threadIdx.x % 32) < e; }
};

// Units of a row [b, e) (all lanes; warp-uniform result).
__device__ __forceinline__ std::int32_t row_unit_count(const std::int32_t* __restrict__ cols, std::int32_t b,
                                                       std::int32_t e, int log_ckv) {
  if (log_ckv == 0) return e - b;  // distinct columns: one unit each
  std::int32_t n = 0;
  for (ColumnSweep sw(cols, b, e, log_ckv); sw.more(); sw.advance()) n += __popc(__ballot_sync(kFull, sw.step()));
  return n;
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
__device__ __forceinline__ void emit_row(const PrepParams& p, const UnitRules& ur,
                                         const std::int32_t* __restrict__ cols, std::int32_t b, std::int32_t e,
                                         std::int32_t n_units, std::int32_t n_row,
                                         std::int64_t o, int desc, std::int32_t* __restrict__ kv_tile,
                                         std::uint64_t* __restrict__ member, std::int32_t* __restrict__ gather) {
  const int lane = threadIdx.x % 32;
  const int log_ckv = ur.log_ckv;
  const int pack = ur.pack;
  const int log_pack = pack ? log2_factor(pack) : 0;
  const std::int32_t kj_mask = ur.c_kv - 1;  // a column's block inside its unit
  std::int32_t units_before = 0;
  for (ColumnSweep sw(cols, b, e, log_ckv); sw.more(); sw.advance()) {
    const bool start = sw.step();
    const std::int32_t c = sw.c;
    const std::int32_t i = sw.base + lane;
    const unsigned bal = __ballot_sync(kFull, start);
    std::uint64_t bits = 0;
    if (!pack && p.membership) {
      // OR of 1 << (col % c_kv) over the unit's columns: a segmented OR over the (at most c_kv) lanes of each unit
      // in this chunk; a unit that continues into the next chunk reads its remaining columns there.
      const bool valid = sw.valid();
      const std::int32_t u = c >> log_ckv;
      bits = warp_segmented_or_down(valid ? std::uint64_t{1} << (c & kj_mask) : 0, u, ur.c_kv);
      if (start && lane + ur.c_kv > 32) {
        for (std::int32_t k = sw.base + 32; k < e && k < i + ur.c_kv; ++k) {
          const std::int32_t ck = __ldg(cols + k);
          if ((ck >> log_ckv) != u) break;
          bits |= std::uint64_t{1} << (ck & kj_mask);
        }
      }
    }
    if (start) {
      const std::int32_t rank = units_before + __popc(bal & lanes_below(lane));
      const std::int32_t unit = c >> log_ckv;
      if (!pack) {
        const std::int32_t ne = ur.entries(unit);
        const std::int32_t first = rank * ur.r_kv;  // units before are whole (only the last one is ragged)
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
    units_before += __popc(bal);
  }
}

// kRowsPerCta consecutive tile rows per CTA, kRowsPerWarp per warp: first every row's entry count, then (kLookBack)
// one look-back for the CTA's total, then the rows are written.
template <bool kLookBack>
__global__ void __launch_bounds__(kThreads, 4)
    rows_stream_kernel(PrepParams p, const std::int32_t* __restrict__ row_offsets,
                       const std::int32_t* __restrict__ cols, std::int32_t* __restrict__ tile_offsets, LookBackState lb,
                       std::int32_t* __restrict__ kv_tile, std::uint64_t* __restrict__ member,
                       std::int32_t* __restrict__ gather, int desc) {
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
