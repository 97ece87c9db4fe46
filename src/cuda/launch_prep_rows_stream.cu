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
#include "kernels/ptx/cp_async.cuh"
#include "kernels/ptx/ldmatrix.cuh"  // smem_addr

namespace tessera::prep {

namespace {

using namespace detail;

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kRowsPerWarp = 2;
constexpr int kRowsPerCta = kWarps * kRowsPerWarp;  // 32: one per lane of the look-back warp
static_assert(kRowsPerCta == 32);
// Columns of a CTA's rows staged in shared memory (32 KB: 4 CTAs per SM keep 128 KB); a CTA whose rows hold more
// (above 25 % density at 1,024 blocks per row) reads them from global memory instead.
constexpr std::int32_t kStageCols = 8192;

// mu(M)'s columns as the builder reads them: column i of the CTA's shared copy, which starts at column `shift`
// (shared loads), or of global memory.
struct SharedColumns {
  static constexpr bool kPrefetch = false;  // shared loads: other warps hide their latency
  const std::int32_t* s;
  std::int32_t shift;
  __device__ __forceinline__ std::int32_t operator[](std::int32_t i) const { return s[i - shift]; }
};
struct GlobalColumns {
  static constexpr bool kPrefetch = true;  // global loads: the next chunk is loaded before this one is used
  const std::int32_t* __restrict__ g;
  __device__ __forceinline__ std::int32_t operator[](std::int32_t i) const { return __ldg(g + i); }
};

// All threads of the CTA: copies columns [cb, ce) into `stage`, from column `first` = cb rounded down to a multiple
// of 4 on, when they fit and mu(M)'s column array is 16-byte aligned: whole 16-byte groups by cp.async, all in
// flight at once, and a ragged tail of 1-3 columns by plain loads (a 16-byte read there could pass the end of the
// array). Returns whether it did (uniform over the CTA); a barrier ends the copy.
__device__ __forceinline__ bool stage_columns(const std::int32_t* __restrict__ cols, std::int32_t cb, std::int32_t ce,
                                              std::int32_t* stage, std::int32_t& first) {
  first = cb & ~3;
  const bool aligned = (reinterpret_cast<std::uintptr_t>(cols) & 15) == 0;
  if (!aligned || ce - first > kStageCols) return false;
  const std::int32_t whole = (ce - first) / 4;  // 16-byte groups inside [first, ce)
  for (std::int32_t k = threadIdx.x; k < whole; k += kThreads)
    ptx::cp_async_16(ptx::smem_addr(stage + 4 * k), cols + first + 4 * k);
  const std::int32_t tail = first + 4 * whole;
  if (static_cast<std::int32_t>(threadIdx.x) < ce - tail) stage[tail - first + threadIdx.x] = __ldg(cols + tail + threadIdx.x);
  ptx::cp_async_commit();
  ptx::cp_async_wait<0>();
  __syncthreads();
  return true;
}

// A sweep over a row's columns [b, e), 32 at a time (lane L holds column base + L), that tells each lane whether
// its column starts a kv unit: its unit differs from the previous column's (shuffled from the lane before; lane 0
// takes the previous chunk's lane 31, or "none" at the row start). From global memory the next chunk is loaded
// before the current one is used (two loads per lane in flight); from the shared copy each chunk is loaded when used.
template <class Columns>
struct ColumnSweep {
  Columns cols;
  std::int32_t base, e;
  int log_ckv;
  std::int32_t c = 0, next = 0;
  std::int32_t carry = -1;  // column before the chunk (-1: none; its unit -1 differs from every unit)

  __device__ __forceinline__ ColumnSweep(Columns cols_, std::int32_t b, std::int32_t e_, int log_ckv_)
      : cols(cols_), base(b), e(e_), log_ckv(log_ckv_) {
    const std::int32_t i = b + threadIdx.x % 32;
    if (Columns::kPrefetch) next = i < e ? cols[i] : 0;
  }
  __device__ __forceinline__ bool more() const { return base < e; }
  /// Takes the chunk at `base` (prefetching the next) and returns whether this lane's column starts a unit.
  __device__ __forceinline__ bool step() {
    const int lane = threadIdx.x % 32;
    const std::int32_t i = base + lane;
    if (Columns::kPrefetch) {
      c = next;
      if (base + 32 < e) next = i + 32 < e ? cols[i + 32] : 0;
    } else {
      c = i < e ? cols[i] : 0;
    }
    std::int32_t prev = __shfl_up_sync(kFull, c, 1);
    if (lane == 0) prev = carry;
    carry = __shfl_sync(kFull, c, 31);
    return i < e && (prev >> log_ckv) != (c >> log_ckv);
  }
  __device__ __forceinline__ void advance() { base += 32; }
  __device__ __forceinline__ bool valid() const { return base + static_cast<std::int32_t>(threadIdx.x % 32) < e; }
};

// Units of a row [b, e) (all lanes; warp-uniform result).
template <class Columns>
__device__ __forceinline__ std::int32_t row_unit_count(Columns cols, std::int32_t b, std::int32_t e, int log_ckv) {
  if (log_ckv == 0) return e - b;  // distinct columns: one unit each
  std::int32_t n = 0;
  for (ColumnSweep<Columns> sw(cols, b, e, log_ckv); sw.more(); sw.advance()) n += __popc(__ballot_sync(kFull, sw.step()));
  return n;
}

// Entries of tile row `row` (c_q == 1: logical row `row` of mu(M), columns [b, e)); all lanes, warp-uniform.
template <class Columns>
__device__ __forceinline__ std::int32_t row_entry_count(const UnitRules& ur, Columns cols, std::int32_t b,
                                                        std::int32_t e, std::int32_t& n_units) {
  n_units = row_unit_count(cols, b, e, ur.log_ckv);
  if (ur.pack) return (n_units + ur.pack - 1) / ur.pack;
  std::int32_t n = n_units * ur.r_kv;
  if (n_units > 0 && (cols[e - 1] >> ur.log_ckv) == ur.last_unit) n += ur.last_extra;
  return n;
}

// Writes the entries of one tile row (columns [b, e), n_units units, n_row entries at o; desc: reversed). Entry k
// of the row goes to o + d0 + step * k (32-bit inside a row). Each form has its own loop, so the per-chunk work is
// only its own:
//  - packed: one gather slot per unit (consecutive ranks, so consecutive addresses); slot 0 also writes the entry's
//    membership and the padding of a short last entry;
//  - span: the lane that starts a unit writes its r_kv entries (fewer for the row's ragged last unit), with the
//    unit's membership (c_q == 1: 8 bits, a 32-bit segmented OR). Expanding the entries one per lane instead
//    (consecutive lanes on consecutive entries, the unit found with __fns) was slower on the H200: Refined r2/r4
//    55/66 -> 80/111 us, from __fns's instruction cost (bench/NOTES.md).
template <class Columns>
__device__ __forceinline__ void emit_row(const PrepParams& p, const UnitRules& ur, Columns cols, std::int32_t b,
                                         std::int32_t e, std::int32_t n_units, std::int32_t n_row, std::int64_t o,
                                         int desc, std::int32_t* __restrict__ kv_tile,
                                         std::uint64_t* __restrict__ member, std::int32_t* __restrict__ gather) {
  const int lane = threadIdx.x % 32;
  const int log_ckv = ur.log_ckv;
  const bool with_member = p.membership != 0;
  const std::int32_t d0 = desc ? n_row - 1 : 0;
  const std::int32_t step = desc ? -1 : 1;
  std::uint64_t* __restrict__ m_row = with_member ? member + o : nullptr;
  std::int32_t units_before = 0;
  if (ur.pack) {
    const int pack = ur.pack;
    const int log_pack = log2_factor(pack);
    std::int32_t* __restrict__ g_row = gather + o * pack;
    for (ColumnSweep<Columns> sw(cols, b, e, log_ckv); sw.more(); sw.advance()) {
      const bool start = sw.step();
      const unsigned bal = __ballot_sync(kFull, start);
      if (start) {
        const std::int32_t rank = units_before + __popc(bal & lanes_below(lane));
        const std::int32_t slot = rank & (pack - 1);
        const std::int32_t de = d0 + step * (rank >> log_pack);
        g_row[de * pack + slot] = sw.c >> log_ckv;
        if (slot == 0) {
          const std::int32_t k = min(pack, n_units - rank);  // units of this entry
          if (with_member) m_row[de] = (std::uint64_t{1} << k) - 1;
          for (std::int32_t s = k; s < pack; ++s) g_row[de * pack + s] = -1;  // padding slots of the last entry
        }
      }
      units_before += __popc(bal);
    }
    return;
  }
  std::int32_t* __restrict__ kv_row = kv_tile + o;
  const std::int32_t c_kv = ur.c_kv;
  const std::int32_t kj_mask = c_kv - 1;  // a column's block inside its unit
  const int r_kv = ur.r_kv;
  for (ColumnSweep<Columns> sw(cols, b, e, log_ckv); sw.more(); sw.advance()) {
    const bool start = sw.step();
    const std::int32_t c = sw.c;
    const std::int32_t unit = c >> log_ckv;
    const unsigned bal = __ballot_sync(kFull, start);
    std::uint32_t bits = 0;  // c_q == 1: membership bits 0 .. c_kv - 1
    if (with_member) {
      // OR of 1 << (col % c_kv) over the unit's columns: a segmented OR over the (at most c_kv) lanes of each unit
      // in this chunk; a unit that continues into the next chunk reads its remaining columns there.
      bits = warp_segmented_or_down(sw.valid() ? 1u << (c & kj_mask) : 0u, unit, c_kv);
      if (start && lane + c_kv > 32) {
        const std::int32_t i = sw.base + lane;
        for (std::int32_t k = sw.base + 32; k < e && k < i + c_kv; ++k) {
          const std::int32_t ck = cols[k];
          if ((ck >> log_ckv) != unit) break;
          bits |= 1u << (ck & kj_mask);
        }
      }
    }
    if (start) {
      // Units before are whole (only the row's last unit can be ragged): this unit's entries start at rank * r_kv.
      const std::int32_t first = (units_before + __popc(bal & lanes_below(lane))) * r_kv;
      const std::int32_t ne = ur.entries(unit);
      for (std::int32_t j = 0; j < ne; ++j) {
        const std::int32_t d = d0 + step * (first + j);
        kv_row[d] = unit * r_kv + j;
        if (with_member) m_row[d] = bits;
      }
    }
    units_before += __popc(bal);
  }
}

// The rows of one CTA (ticket `tile`): first every row's entry count, then (kLookBack) one look-back for the CTA's
// total, then the rows are written. All threads.
template <bool kLookBack, class Columns>
__device__ __forceinline__ void rows_stream_cta(const PrepParams& p, const UnitRules& ur, std::int32_t tile,
                                                const std::int32_t* __restrict__ row_offsets, Columns cs,
                                                std::int32_t* __restrict__ tile_offsets, const LookBackState& lb,
                                                std::int32_t* __restrict__ kv_tile, std::uint64_t* __restrict__ member,
                                                std::int32_t* __restrict__ gather, int desc) {
  __shared__ std::int32_t row_b[kRowsPerCta], row_e[kRowsPerCta], row_units[kRowsPerCta], row_entries[kRowsPerCta];
  __shared__ std::int32_t row_first[kRowsPerCta];  // kLookBack: the row's first entry
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const std::int32_t rows = static_cast<std::int32_t>(p.tile_rows());
  // The warp's kRowsPerWarp + 1 row offsets in one load (lane r: offset of row r0 + r), then one row at a time.
  const std::int32_t r0 = tile * kRowsPerCta + warp * kRowsPerWarp;
  const std::int32_t off = lane <= kRowsPerWarp && r0 + lane <= rows ? __ldg(row_offsets + r0 + lane) : 0;
#pragma unroll 1
  for (int k = 0; k < kRowsPerWarp; ++k) {
    const int r = warp * kRowsPerWarp + k;
    const std::int32_t row = r0 + k;
    const std::int32_t b = __shfl_sync(kFull, off, k), e = __shfl_sync(kFull, off, k + 1);
    std::int32_t units = 0, n = 0;
    if (row < rows) n = row_entry_count(ur, cs, b, e, units);  // warp-uniform; c_q == 1: logical row `row`
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
    if (warp == 0) lookback_finish_warp(lb, static_cast<std::int32_t>(gridDim.x));  // the other warps go on
  } else {
    __syncwarp();
  }
#pragma unroll 1
  for (int r = warp * kRowsPerWarp; r < (warp + 1) * kRowsPerWarp; ++r) {
    const std::int32_t n = row_entries[r];
    if (n == 0) continue;
    const std::int64_t o = kLookBack ? row_first[r] : row_b[r];  // Direct KV: mu(M)'s offsets
    emit_row(p, ur, cs, row_b[r], row_e[r], row_units[r], n, o, desc, kv_tile, member, gather);
  }
}

// kRowsPerCta consecutive tile rows per CTA, kRowsPerWarp per warp; their columns are read from a shared copy when
// it fits (stage_columns), else from global memory.
template <bool kLookBack>
__global__ void __launch_bounds__(kThreads, 3)
    rows_stream_kernel(PrepParams p, const std::int32_t* __restrict__ row_offsets,
                       const std::int32_t* __restrict__ cols, std::int32_t* __restrict__ tile_offsets, LookBackState lb,
                       std::int32_t* __restrict__ kv_tile, std::uint64_t* __restrict__ member,
                       std::int32_t* __restrict__ gather, int desc) {
  __shared__ alignas(16) std::int32_t stage[kStageCols];
  __shared__ std::int32_t cta_ticket;
  const std::int32_t rows = static_cast<std::int32_t>(p.tile_rows());
  const std::int32_t tile = kLookBack ? lookback_ticket(lb, cta_ticket) : static_cast<std::int32_t>(blockIdx.x);
  const UnitRules ur(p);
  const std::int32_t cta_r0 = tile * kRowsPerCta;  // < rows: one CTA per kRowsPerCta rows
  std::int32_t first = 0;
  if (stage_columns(cols, __ldg(row_offsets + cta_r0), __ldg(row_offsets + min(cta_r0 + kRowsPerCta, rows)), stage,
                    first)) {
    rows_stream_cta<kLookBack>(p, ur, tile, row_offsets, SharedColumns{stage, first}, tile_offsets, lb, kv_tile,
                               member, gather, desc);
  } else {
    rows_stream_cta<kLookBack>(p, ur, tile, row_offsets, GlobalColumns{cols}, tile_offsets, lb, kv_tile, member,
                               gather, desc);
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
