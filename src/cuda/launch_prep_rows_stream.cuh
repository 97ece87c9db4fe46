#pragma once
// Device pieces of the streaming tile-row builders for c_q == 1 (launch_prep_rows_stream.cu: one CTA per 32 tile
// rows; launch_prep_rows_stream_persistent.cu: persistent CTAs that pipeline the look-back). The method is described
// in launch_prep_rows_stream.cu. Device code only.
#include <cstdint>
#include <type_traits>

#include "core/launch_prep_rules.hpp"
#include "cuda/launch_prep_warp.cuh"
#include "kernels/ptx/cp_async.cuh"
#include "kernels/ptx/ldmatrix.cuh"  // smem_addr

namespace tessera::prep::stream {

using namespace detail;

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kRowsPerWarp = 2;
constexpr int kRowsPerCta = kWarps * kRowsPerWarp;  // 32: one per lane of the look-back warp
static_assert(kRowsPerCta == 32);
// Where a builder puts each tile row's entries (TileMetadataView): at mu(M)'s own offsets (kMask: Direct KV, nothing
// written), row-aligned (kAligned: at r_kv times mu(M)'s offset, the row's end written to tile_ends; no look-back),
// or compact (kLookBack: the offsets come from a decoupled look-back over the CTAs and are written).
enum class RowOffsets { kMask, kAligned, kLookBack };

// Columns of a CTA's rows staged in shared memory (32 KB per buffer); a CTA whose rows hold more (above 25 % density
// at 1,024 blocks per row) reads them from global memory instead.
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

// `kCopyThreads` threads (threadIdx.x < kCopyThreads): starts copying columns [cb, ce) into `stage` (kCapacity
// columns), from column `first` = cb rounded down to a multiple of 4 on, when they fit and mu(M)'s column array is
// 16-byte aligned: whole
// 16-byte groups by cp.async, all in flight at once (one committed group), and a ragged tail of 1-3 columns by plain
// loads (a 16-byte read there could pass the end of the array). Returns whether it did (uniform over the threads);
// the caller waits for the group and then synchronizes the threads.
template <int kCopyThreads, std::int32_t kCapacity = kStageCols>
__device__ __forceinline__ bool stage_columns_issue(const std::int32_t* __restrict__ cols, std::int32_t cb,
                                                    std::int32_t ce, std::int32_t* stage, std::int32_t& first) {
  first = cb & ~3;
  const bool aligned = (reinterpret_cast<std::uintptr_t>(cols) & 15) == 0;
  if (!aligned || ce - first > kCapacity) return false;
  const std::int32_t whole = (ce - first) / 4;  // 16-byte groups inside [first, ce)
  for (std::int32_t k = threadIdx.x; k < whole; k += kCopyThreads)
    ptx::cp_async_16(ptx::smem_addr(stage + 4 * k), cols + first + 4 * k);
  const std::int32_t tail = first + 4 * whole;
  if (static_cast<std::int32_t>(threadIdx.x) < ce - tail)
    stage[tail - first + threadIdx.x] = __ldg(cols + tail + threadIdx.x);
  ptx::cp_async_commit();
  return true;
}

// All kThreads threads of the CTA: stage_columns_issue, then the wait and a CTA barrier when it copied.
template <std::int32_t kCapacity = kStageCols>
__device__ __forceinline__ bool stage_columns(const std::int32_t* __restrict__ cols, std::int32_t cb, std::int32_t ce,
                                              std::int32_t* stage, std::int32_t& first) {
  if (!stage_columns_issue<kThreads, kCapacity>(cols, cb, ce, stage, first)) return false;
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
  std::int32_t prev = -1;   // the column before this lane's (after step(); -1 at the row start)
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
    prev = __shfl_up_sync(kFull, c, 1);
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
  for (ColumnSweep<Columns> sw(cols, b, e, log_ckv); sw.more(); sw.advance())
    n += __popc(__ballot_sync(kFull, sw.step()));
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

// Where emit_row puts the row's entry k (k in ascending build order) for ascending (step 1) or descending (d0 = n - 1,
// step -1) traversal. emit_row calls chunk() once per 32 columns (the order of launch_prep_run_major.cuh needs it).
struct LinearOrder {
  std::int32_t d0, step;
  template <class Sweep>
  __device__ __forceinline__ void chunk(const UnitRules&, const Sweep&, bool, unsigned, std::int32_t) {}
  __device__ __forceinline__ std::int32_t at(std::int32_t k) const { return d0 + step * k; }
};

// One chunk of emit_refined_row: its n entries at kv_row[d], lane L's first one at d, then every 32nd (d stepping by
// `stride`); the chunk's columns in c (lane u: column u). Lane L's first entry is index j of unit u; 32 entries on,
// the unit is du further and the index dj (32 = du r_kv + dj); kWrap = (dj != 0): r_kv 3 or 6, else j is constant.
template <bool kWrap>
__device__ __forceinline__ void emit_refined_chunk(std::int32_t* __restrict__ kv_row, std::int32_t d,
                                                   std::int32_t stride, std::int32_t n, std::int32_t c,
                                                   std::int32_t r_kv, std::int32_t u, std::int32_t j, std::int32_t du,
                                                   std::int32_t dj) {
  const int lane = threadIdx.x % 32;
  const std::int32_t whole = n & ~31;  // entries of the whole 32-entry steps
  std::int32_t q0 = 0;
#pragma unroll 2
  for (; q0 < whole; q0 += 32, d += stride) {  // warp-uniform trip count: every lane shuffles and stores
    kv_row[d] = __shfl_sync(kFull, c, u) * r_kv + j;
    u += du;
    if constexpr (kWrap) {
      j += dj;
      if (j >= r_kv) j -= r_kv, ++u;
    }
  }
  if (q0 < n) {  // the ragged step: lanes from n - q0 on hold no entry
    const std::int32_t unit = __shfl_sync(kFull, c, u);
    if (q0 + lane < n) kv_row[d] = unit * r_kv + j;
  }
}

// Writes the entries of a Refined KV row (c_kv == 1, r_kv > 1; no membership) at kv_row in linear order: every
// column is a unit of r_kv entries (fewer for the ragged last unit), and the warp writes the chunk's entries 32
// consecutive ones at a time: lane L writes entry q = 32 i + L of the chunk, whose unit is the chunk's column
// q / r_kv (shuffled from that lane) and whose index in the unit is q % r_kv. One store instruction then covers 128
// contiguous bytes (4 sectors) instead of 32 lanes' groups of r_kv entries (16 sectors at r_kv = 4, each written
// r_kv times). The unit comes from a shuffle, not from __fns (which made an earlier one-entry-per-lane emission
// slower: bench/NOTES.md, fifth pass).
template <class Columns>
__device__ __forceinline__ void emit_refined_row(const UnitRules& ur, Columns cols, std::int32_t b, std::int32_t e,
                                                 LinearOrder order, std::int32_t* __restrict__ kv_row) {
  const int lane = threadIdx.x % 32;
  const std::int32_t r_kv = ur.r_kv;
  const std::int32_t u0 = lane / r_kv, j0 = lane - u0 * r_kv;  // entry q = lane: unit u0, index j0
  const std::int32_t du = 32 / r_kv, dj = 32 - du * r_kv;      // q -> q + 32: 32 = du r_kv + dj
  const std::int32_t stride = 32 * order.step;                 // entry q -> q + 32
  std::int32_t k0 = 0;                                         // entries of the row before the chunk
  for (ColumnSweep<Columns> sw(cols, b, e, 0); sw.more(); sw.advance()) {
    sw.step();
    const std::int32_t units = min(32, e - sw.base);  // the chunk's columns, one unit each
    std::int32_t n = units * r_kv;                     // the chunk's entries (units before are whole)
    if (__shfl_sync(kFull, sw.c, units - 1) == ur.last_unit) n += ur.last_extra;
    const std::int32_t d = order.at(k0 + lane);
    if (dj == 0) {
      emit_refined_chunk<false>(kv_row, d, stride, n, sw.c, r_kv, u0, j0, du, dj);
    } else {
      emit_refined_chunk<true>(kv_row, d, stride, n, sw.c, r_kv, u0, j0, du, dj);
    }
    k0 += n;
  }
}

// Writes the entries of one tile row (columns [b, e), n_units units, n_row entries at o): entry k of the row (k in
// ascending build order) goes to o + order.at(k) (32-bit inside a row). Each form has its own loop, so the per-chunk
// work is only its own:
//  - packed: one gather slot per unit (consecutive ranks, so consecutive addresses); slot 0 also writes the entry's
//    membership and the padding of a short last entry;
//  - span: the lane that starts a unit writes its r_kv entries (fewer for the row's ragged last unit), with the
//    unit's membership (c_q == 1: 8 bits, a 32-bit segmented OR). Expanding the entries one per lane instead
//    (consecutive lanes on consecutive entries, the unit found with __fns) was slower on the H200: Refined r2/r4
//    55/66 -> 80/111 us, from __fns's instruction cost (bench/NOTES.md);
//  - Refined KV in linear order: emit_refined_row (one entry per lane, the unit shuffled: c_kv == 1).
// kMember: whether the plan has membership (p.membership, which the launch turns into this constant): the kernels
// without it (Direct and Refined KV) carry no member code at all. kRefined: whether the row may be Refined KV (only
// kernels with a look-back and without membership: Direct KV has neither r_kv > 1 nor a look-back).
// Returns the row's units (the entry count when r_kv == 1 and not packed: what a deferred count needs).
template <bool kMember, bool kRefined, class Columns, class Order>
__device__ __forceinline__ std::int32_t emit_row(const PrepParams& p, const UnitRules& ur, Columns cols, std::int32_t b,
                                         std::int32_t e, std::int32_t n_units, std::int64_t o, Order order,
                                         std::int32_t* __restrict__ kv_tile, std::uint8_t* __restrict__ member,
                                         std::int32_t* __restrict__ gather) {
  const int lane = threadIdx.x % 32;
  const int log_ckv = ur.log_ckv;
  std::uint8_t* __restrict__ m_row = kMember ? member + o : nullptr;  // c_q == 1: one byte per entry
  std::int32_t units_before = 0;
  if (ur.pack) {
    const int pack = ur.pack;
    const int log_pack = log2_factor(pack);
    std::int32_t* __restrict__ g_row = gather + o * pack;
    for (ColumnSweep<Columns> sw(cols, b, e, log_ckv); sw.more(); sw.advance()) {
      const bool start = sw.step();
      const unsigned bal = __ballot_sync(kFull, start);
      order.chunk(ur, sw, start, bal, units_before);
      if (start) {
        const std::int32_t rank = units_before + __popc(bal & lanes_below(lane));
        const std::int32_t slot = rank & (pack - 1);
        const std::int32_t de = order.at(rank >> log_pack);
        g_row[de * pack + slot] = sw.c >> log_ckv;
        if (slot == 0) {
          const std::int32_t k = min(pack, n_units - rank);  // units of this entry
          if constexpr (kMember) m_row[de] = static_cast<std::uint8_t>((1u << k) - 1u);
          for (std::int32_t s = k; s < pack; ++s) g_row[de * pack + s] = -1;  // padding slots of the last entry
        }
      }
      units_before += __popc(bal);
    }
    return units_before;
  }
  std::int32_t* __restrict__ kv_row = kv_tile + o;
  const std::int32_t c_kv = ur.c_kv;
  const std::int32_t kj_mask = c_kv - 1;  // a column's block inside its unit
  const int r_kv = ur.r_kv;
  static_assert(!(kMember && kRefined), "Refined KV (c_kv == 1, not packed, c_q == 1) has no membership");
  if constexpr (kRefined && std::is_same_v<Order, LinearOrder>) {
    if (log_ckv == 0 && r_kv > 1) {  // Refined KV
      emit_refined_row(ur, cols, b, e, order, kv_row);
      return e - b;
    }
  }
  for (ColumnSweep<Columns> sw(cols, b, e, log_ckv); sw.more(); sw.advance()) {
    const bool start = sw.step();
    const std::int32_t c = sw.c;
    const std::int32_t unit = c >> log_ckv;
    const unsigned bal = __ballot_sync(kFull, start);
    order.chunk(ur, sw, start, bal, units_before);
    [[maybe_unused]] std::uint32_t bits = 0;  // c_q == 1: membership bits 0 .. c_kv - 1
    if constexpr (kMember) {
      // OR of 1 << (col % c_kv) over the unit's columns: a segmented OR over the (at most c_kv) lanes of each unit
      // in this chunk. Only the chunk's last unit can continue into the next chunk, by at most c_kv - 1 columns:
      // lanes 0 .. c_kv - 2 read those columns, and one warp OR-reduction gives their bits to that unit's start
      // lane (the unit's start lane walking them alone serialised up to 7 dependent loads per chunk at c_kv = 8).
      bits = warp_segmented_or_down(sw.valid() ? 1u << (c & kj_mask) : 0u, unit, c_kv);
      if (sw.base + 32 < e) {  // warp-uniform: a next chunk exists (so lane 31's column is valid)
        const std::int32_t last_unit = __shfl_sync(kFull, unit, 31);
        const std::int32_t k = sw.base + 32 + lane;
        std::uint32_t next_bits = 0;
        if (lane < c_kv - 1 && k < e) {
          const std::int32_t ck = cols[k];
          if ((ck >> log_ckv) == last_unit) next_bits = 1u << (ck & kj_mask);
        }
        next_bits = __reduce_or_sync(kFull, next_bits);
        if (start && unit == last_unit) bits |= next_bits;
      }
    }
    if (start) {
      // Units before are whole (only the row's last unit can be ragged): this unit's entries start at rank * r_kv.
      const std::int32_t first = (units_before + __popc(bal & lanes_below(lane))) * r_kv;
      const std::int32_t ne = ur.entries(unit);
#pragma unroll 1
      for (std::int32_t j = 0; j < ne; ++j) {  // Direct and Coarsened KV: one entry, so no unrolled remainder
        const std::int32_t d = order.at(first + j);
        kv_row[d] = unit * r_kv + j;
        if constexpr (kMember) m_row[d] = static_cast<std::uint8_t>(bits);
      }
    }
    units_before += __popc(bal);
  }
  return units_before;
}

// Facts of one ticket's tile rows (at most kRowsPerCta), in shared memory.
struct CtaRows {
  std::int32_t b[kRowsPerCta], e[kRowsPerCta];  ///< the row's columns [b, e) in mu(M) (c_q == 1: one logical row)
  std::int32_t units[kRowsPerCta], entries[kRowsPerCta];
  std::int32_t first[kRowsPerCta];  ///< with a look-back: the row's first entry
};

// Calls f(r, n) for each of the calling warp's kRowsPerWarp rows of the CTA (warp w: rows kRowsPerWarp w ..) that has
// entries (n = cr.entries[r] > 0), one row after another (the loop is not unrolled: one copy of the row's code).
template <class F>
__device__ __forceinline__ void for_warp_rows(const CtaRows& cr, F&& f) {
  const int warp = threadIdx.x / 32;
#pragma unroll 1
  for (int r = warp * kRowsPerWarp; r < (warp + 1) * kRowsPerWarp; ++r) {
    const std::int32_t n = cr.entries[r];
    if (n != 0) f(r, n);
  }
}

// Whether a row-aligned ascending span row with c_kv > 1 (Coarsened KV) defers its count to the emission: nothing
// before the emission needs it (the row's first entry is fixed, ascending order needs no n - 1 - k, span entries
// need no padding), so the emission's own unit count (emit_row's result) gives the end, and a ballot sweep over the
// columns is saved. Warp-uniform. (c_kv == 1 counts from the row length at no cost.)
__device__ __forceinline__ bool defer_count(RowOffsets off, const UnitRules& ur, int desc) {
  return off == RowOffsets::kAligned && desc == 0 && ur.pack == 0 && ur.log_ckv > 0;
}

// Warps 0 .. rows_per_ticket / kRowsPerWarp - 1: every row's columns, units and entries (warp w: rows
// kRowsPerWarp w ..) of ticket `tile`, which holds tile rows rows_per_ticket * tile ... With `deferred`
// (defer_count), units and entries are set to the row's column count, an upper bound that is 0 exactly for an empty
// row; the emission then stores the real count in cr.entries.
template <class Columns>
__device__ __forceinline__ void count_cta_rows(const PrepParams& p, const UnitRules& ur, std::int32_t tile,
                                               std::int32_t rows_per_ticket,
                                               const std::int32_t* __restrict__ row_offsets, Columns cs, CtaRows& cr,
                                               bool deferred = false) {
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const std::int32_t rows = static_cast<std::int32_t>(p.tile_rows());
  // The warp's kRowsPerWarp + 1 row offsets in one load (lane r: offset of row r0 + r), then one row at a time.
  const std::int32_t r0 = tile * rows_per_ticket + warp * kRowsPerWarp;
  const std::int32_t off = lane <= kRowsPerWarp && r0 + lane <= rows ? __ldg(row_offsets + r0 + lane) : 0;
#pragma unroll 1
  for (int k = 0; k < kRowsPerWarp; ++k) {
    const int r = warp * kRowsPerWarp + k;
    const std::int32_t row = r0 + k;
    const std::int32_t b = __shfl_sync(kFull, off, k), e = __shfl_sync(kFull, off, k + 1);
    std::int32_t units = 0, n = 0;
    if (row < rows) {  // warp-uniform; c_q == 1: logical row `row`
      if (deferred) {
        units = n = e - b;
      } else {
        n = row_entry_count(ur, cs, b, e, units);
      }
    }
    if (lane == 0) cr.b[r] = b, cr.e[r] = e, cr.units[r] = units, cr.entries[r] = n;
  }
}

// One warp, lane = row of the ticket (lanes from rows_per_ticket on hold v = 0 and write nothing): the rows' first
// entries (exclusive scan `excl` of the entry counts `v` after the `before` entries of earlier tickets) into
// cr.first and tile_offsets (the last row also writes the end).
__device__ __forceinline__ void write_cta_row_offsets(CtaRows& cr, const PrepParams& p, std::int32_t tile,
                                                      std::int32_t rows_per_ticket, std::int32_t before,
                                                      std::int32_t excl, std::int32_t v,
                                                      std::int32_t* __restrict__ tile_offsets) {
  const int lane = threadIdx.x % 32;
  if (lane >= rows_per_ticket) return;
  const std::int32_t rows = static_cast<std::int32_t>(p.tile_rows());
  cr.first[lane] = before + excl;
  const std::int32_t row = tile * rows_per_ticket + lane;
  if (row < rows) tile_offsets[row] = before + excl;
  if (row == rows - 1) tile_offsets[rows] = before + excl + v;
}

// The row's first entry: kLookBack at cr.first; kAligned at r_kv times mu(M)'s offset; kMask at mu(M)'s offset.
template <RowOffsets kOff>
__device__ __forceinline__ std::int64_t row_first_entry(const UnitRules& ur, const CtaRows& cr, int r) {
  if constexpr (kOff == RowOffsets::kLookBack) return cr.first[r];
  if constexpr (kOff == RowOffsets::kAligned) return static_cast<std::int64_t>(cr.b[r]) * ur.r_kv;
  return cr.b[r];
}

// Row-aligned layout, the calling warp's rows of ticket `tile` (rows_per_ticket rows; after the emission, whose
// deferred counts are then in cr.entries, and a __syncwarp): lane 0 writes each row's first entry and end, and the
// grid's last row also the extent tile_offsets[rows] = r_kv * (its columns' end = mu(M)'s nnz).
__device__ __forceinline__ void write_aligned_row_offsets(const PrepParams& p, const UnitRules& ur, const CtaRows& cr,
                                                          std::int32_t tile, std::int32_t rows_per_ticket,
                                                          std::int32_t* __restrict__ tile_offsets,
                                                          std::int32_t* __restrict__ tile_ends) {
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 != 0) return;
  const std::int32_t rows = static_cast<std::int32_t>(p.tile_rows());
  for (int k = 0; k < kRowsPerWarp; ++k) {
    const int r = warp * kRowsPerWarp + k;
    const std::int32_t row = tile * rows_per_ticket + r;
    if (row >= rows) break;
    const std::int32_t first = cr.b[r] * ur.r_kv;
    tile_offsets[row] = first;
    tile_ends[row] = first + cr.entries[r];
    if (row == rows - 1) tile_offsets[rows] = cr.e[r] * ur.r_kv;
  }
}

// Warps 0 .. kWarps-1: each writes its rows' entries at row_first_entry<kOff>; kMember == (p.membership != 0).
// With `deferred` (defer_count) lane 0 stores each row's emitted entry count in cr.entries.
template <RowOffsets kOff, bool kMember, class Columns>
__device__ __forceinline__ void emit_cta_rows(const PrepParams& p, const UnitRules& ur, Columns cs, CtaRows& cr,
                                              int desc, std::int32_t* __restrict__ kv_tile,
                                              std::uint8_t* __restrict__ member, std::int32_t* __restrict__ gather,
                                              bool deferred = false) {
  for_warp_rows(cr, [&](int r, std::int32_t n) {
    const std::int64_t o = row_first_entry<kOff>(ur, cr, r);
    const LinearOrder order{desc ? n - 1 : 0, desc ? -1 : 1};
    // Refined KV is possible where the offsets are not mu(M)'s (Direct KV) and there is no membership.
    const std::int32_t units = emit_row<kMember, kOff != RowOffsets::kMask && !kMember>(
        p, ur, cs, cr.b[r], cr.e[r], cr.units[r], o, order, kv_tile, member, gather);
    if (deferred && threadIdx.x % 32 == 0) cr.entries[r] = units;  // span, r_kv == 1: one entry per unit
  });
}

}  // namespace tessera::prep::stream
