// Single-pass GPU tile-row builder (c_q > 1, span and packed forms): every tile row's entries and membership, and the
// offsets, in one launch that reads mu(M)'s columns once. Output is defined by core/launch_prep_rules.hpp
// (build_tile_row, reorder_tile_row for desc) and equals the CPU twins bit for bit; only the method differs:
//  - One warp per tile row, 4 rows per CTA. The warp loads all columns of the row's c_q logical rows (contiguous
//    in mu(M)'s CSR) with independent coalesced loads, 4 per lane in flight, and sets them in a bitmap of the
//    whole row in shared memory (ceil(n_kvb / 32) words per logical row, the c_q rows' words of one position
//    adjacent, so one vector load reads a position's words of all logical rows; union for Coarsened-Q).
//  - The row's entry count is a popcount over the bitmap's group heads. The CTA sums its 4 rows and takes its
//    first entry from a decoupled look-back over the CTAs (launch_prep_lookback.cuh); it writes its rows'
//    tile_offsets (the last row also tile_offsets[rows]). No count pass, no scan launch.
//  - Emission from the bitmap, 32 entries at a time with one entry per lane (each lane finds its entry's word,
//    unit and offset from a warp scan of the per-word counts and a byte select table in shared memory), stored
//    coalesced. Descending traversal is the index permutation n - 1 - k.
//  - Packed KV: the same expansion one unit per lane (unit rank k of the row: entry k / pack, slot k % pack), so
//    consecutive lanes store consecutive gather slots; an entry's membership is a segmented OR over its (at most
//    pack) lanes, carried into the next round when the entry continues there, and stored once by one lane (no
//    clearing pass, no atomics).
//  - Membership words are c_q bytes (MemberWord<kCq>, prep::member_bytes): bit qi * 8 + kj with qi < c_q.
// Used for c_q in {2, 4, 8}, one kernel per c_q and form (span / packed) (c_q == 1 goes to the streaming builder,
// launch_prep_rows_stream.cu).
// Rows whose bitmaps do not fit (4 * c_q * ceil(n_kvb / 32) words > 32 KB: n_kvb > 8,192 at c_q = 8, > 16,384 at
// c_q = 4, > 32,768 at c_q = 2) use the two-pass builder in launch_prep_tiles.cu.
#include <cuda_runtime.h>

#include <climits>
#include <type_traits>

#include "core/bit_select.hpp"
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

// One tile row's bitmaps in shared memory, interleaved: bm[w * kCq + qi], bit b = block w * 32 + b of logical row
// qi (zero for qi >= the row's logical rows), so the kCq words of one position are one vector load.
template <int kCq>
struct RowBitmap {
  std::uint32_t* bm;
  std::int32_t words;

  using Vec = std::conditional_t<kCq == 2, uint2, uint4>;  // kCq 2: one uint2; 4: one uint4; 8: two uint4
  static constexpr int kVecs = kCq == 8 ? 2 : 1;

  __device__ __forceinline__ const Vec* at(std::int32_t w) const { return reinterpret_cast<const Vec*>(bm + w * kCq); }
  __device__ __forceinline__ std::uint32_t union_word(std::int32_t w) const {
    const Vec* v = at(w);
    std::uint32_t u = 0;
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      const Vec x = v[i];
      if constexpr (kCq == 2) {
        u |= x.x | x.y;
      } else {
        u |= x.x | x.y | x.z | x.w;
      }
    }
    return u;
  }
};

// Fills the warp's bitmap with tile row `row` (all lanes). bounds: the warp's kMaxMappingFactor + 1 shared ints.
template <int kCq>
__device__ __forceinline__ void load_row(const PrepParams& p, const std::int32_t* __restrict__ row_offsets,
                                        const std::int32_t* __restrict__ cols, std::int32_t row, std::uint32_t* bm,
                                        std::int32_t words, std::int32_t* bounds) {
  const int lane = threadIdx.x % 32;
  const std::int32_t rph = static_cast<std::int32_t>(p.rows_per_head);
  const std::int32_t n_qb = static_cast<std::int32_t>(p.n_qb);
  const std::int32_t mh = row / rph;
  const std::int32_t t = row - mh * rph;
  const int nq = min(kCq, n_qb - t * kCq);  // >= 1: t < ceil(n_qb / c_q)
  const std::int64_t lr0 = static_cast<std::int64_t>(mh) * n_qb + static_cast<std::int64_t>(t) * kCq;
  if (lane <= nq) bounds[lane] = __ldg(row_offsets + lr0 + lane);
  for (std::int32_t i = lane; i < kCq * words; i += 32) bm[i] = 0;  // rows qi >= nq stay zero
  __syncwarp();
  // The nq logical rows' columns are contiguous in cols: [bounds[0], bounds[nq]).
  const std::int32_t b = bounds[0], e = bounds[nq];
  std::int32_t bnd[kCq - 1];  // ends of logical rows 0 .. nq - 2 (registers: read per column below)
#pragma unroll
  for (int q = 1; q < kCq; ++q) bnd[q - 1] = q < nq ? bounds[q] : INT_MAX;
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
      for (int q = 0; q < kCq - 1; ++q) qi += idx >= bnd[q];
      atomicOr(bm + (v[k] >> 5) * kCq + qi, 1u << (v[k] & 31));
    }
  }
  __syncwarp();
}

// Entries (span forms) or units (packed) of the row in the bitmap (warp-uniform result).
template <int kCq>
__device__ __forceinline__ std::int32_t count_row(const UnitRules& ur, const RowBitmap<kCq>& r) {
  std::int32_t n = 0;
  for (std::int32_t w = threadIdx.x % 32; w < r.words; w += 32)
    n += ur.count(group_heads(r.union_word(w), ur.c_kv), w * 32);
  return warp_sum(n);
}

// Membership bits of the span unit whose head is bit b of word w: byte qi holds (row qi's word >> b) & group_mask,
// so bits qi * 8 + kj of its c_kv blocks. group_mask4: group_mask in every byte.
// row_saddr: the row's bitmap as a 32-bit shared-memory address (__cvta_generic_to_shared of RowBitmap::bm); the
// loads go through PTX ld.shared so that the address stays one 32-bit register (a generic pointer is rebuilt from
// the CTA's shared window in every iteration).
template <int kCq>
__device__ __forceinline__ std::uint64_t span_bits(std::uint32_t row_saddr, std::int32_t w, int b,
                                                   std::uint32_t group_mask4) {
  const std::uint32_t a = row_saddr + static_cast<std::uint32_t>(w) * (kCq * 4);
  std::uint32_t x[kCq];
  if constexpr (kCq == 2) {
    asm("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(x[0]), "=r"(x[1]) : "r"(a));
  } else {
#pragma unroll
    for (int i = 0; i < kCq; i += 4)
      asm("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
          : "=r"(x[i]), "=r"(x[i + 1]), "=r"(x[i + 2]), "=r"(x[i + 3])
          : "r"(a + i * 4));
  }
  std::uint32_t half[2] = {0u, 0u};  // bytes qi 0..3, 4..7
#pragma unroll
  for (int i = 0; i < kCq; i += 4) {
    const std::uint32_t pair01 = __byte_perm(x[i] >> b, x[i + 1] >> b, 0x0040);  // bytes: qi, qi + 1
    half[i / 4] = kCq == 2 ? pair01 & (group_mask4 & 0xffffu)
                           : __byte_perm(pair01, __byte_perm(x[i + 2] >> b, x[i + 3] >> b, 0x0040), 0x5410) &
                                 group_mask4;
  }
  return (static_cast<std::uint64_t>(half[1]) << 32) | half[0];
}

// Span forms: entries of the row, stored at kv_row[step * i] (and member_row[step * i], a word of kCq bytes:
// MemberWord<kCq>) for the row's entry i:
// step = 1 from the row's first entry (asc), step = -1 from its last (desc: the reversal n - 1 - i). For each
// stretch of 32 words, lane L owns word w0 + L, and a warp scan of the per-word entry counts gives each word's first
// entry. The stretch's entries are then expanded 32 at a time with one entry per lane: lane L takes entry
// e = base + L, finds the word that holds it (binary search over the scanned counts with shuffles), the unit inside
// the word (the n-th group head, nth_set_bit with the byte table `lut` in shared memory) and the entry inside the
// unit, and stores it. Consecutive lanes store consecutive entries (coalesced, ascending or descending addresses);
// no lane loops over its own word's entries, so the warp does not diverge. Entry offsets inside the row are 32-bit
// and the store addresses are cursors stepped by 32 entries per round (no 64-bit index arithmetic per entry).
template <int kCq>
__device__ __forceinline__ void emit_span_row(const UnitRules& ur, const RowBitmap<kCq>& r, int step,
                                              std::int32_t* __restrict__ kv_row,
                                              MemberWord<kCq>* __restrict__ member_row, const std::uint8_t* lut) {
  const int lane = threadIdx.x % 32;
  const RefineDivider rd(ur.r_kv);
  const std::uint32_t group_mask4 = ur.group_mask * 0x01010101u;
  const int log_ckv = ur.log_ckv, r_kv = ur.r_kv;
  const auto row_saddr = static_cast<std::uint32_t>(__cvta_generic_to_shared(r.bm));
  std::int32_t done = 0;  // entries of the row before this stretch
  for (std::int32_t w0 = 0; w0 < r.words; w0 += 32) {
    const std::int32_t w = w0 + lane;
    const std::uint32_t u = w < r.words ? r.union_word(w) : 0u;
    if (__ballot_sync(kFull, u != 0) == 0) continue;  // warp-uniform: no block in these 32 words
    const std::uint32_t heads = group_heads(u, ur.c_kv);
    const std::int32_t count = ur.count(heads, w * 32);
    const std::int32_t first = warp_exclusive_scan(count, lane);  // the lane's first entry in the stretch
    const std::int32_t total = __shfl_sync(kFull, first + count, 31);
    // The lane's store cursors, as integer addresses: they step past the row's ends on the lanes that store nothing,
    // and member_row is null without membership.
    const auto at = static_cast<std::uintptr_t>(step * (done + lane));  // entries from the row base (mod 2^64)
    const auto stride = static_cast<std::uintptr_t>(32 * step);
    std::uintptr_t kv_at = reinterpret_cast<std::uintptr_t>(kv_row) + at * sizeof(std::int32_t);
    std::uintptr_t member_at = reinterpret_cast<std::uintptr_t>(member_row) + at * sizeof(MemberWord<kCq>);
#pragma unroll 1
    for (std::int32_t base = 0; base < total; base += 32) {
      const std::int32_t e = base + lane;
      const int owner = warp_owner_lane(first, e);
      const std::int32_t k = e - __shfl_sync(kFull, first, owner);  // entry inside the owner's word
      const std::uint32_t h = __shfl_sync(kFull, heads, owner);
      if (e < total) {
        // Units before the ragged last one have r_kv entries each, and the last unit is the word's last head.
        const int b = nth_set_bit(h, rd.div(k), lut);
        const std::int32_t ow = w0 + owner;
        *reinterpret_cast<std::int32_t*>(kv_at) = ((ow * 32 + b) >> log_ckv) * r_kv + rd.mod(k);
        if (member_row) {  // bytes qi < kCq of the bits: the rest are zero
          *reinterpret_cast<MemberWord<kCq>*>(member_at) =
              static_cast<MemberWord<kCq>>(span_bits<kCq>(row_saddr, ow, b, group_mask4));
        }
      }
      kv_at += stride * sizeof(std::int32_t);
      member_at += stride * sizeof(MemberWord<kCq>);
    }
    done += total;
  }
}

// Packed KV (c_kv == 1: a unit is a logical kv block): the row's n_units units in n_row entries. g_row: the gather
// slots of the row's first entry (gather + o * pack); m_row: its membership (member + o, words of kCq bytes), or null.
// desc: entry i of the row goes to entry n_row - 1 - i (its slots keep their order). Per stretch of 32 words as
// emit_span_row, then one unit per lane: lane L takes the stretch's unit e = base + L (row rank k = done + e) and
// writes gather slot k % pack of entry k / pack (consecutive lanes: consecutive slots; the slot of a lane is fixed
// within a stretch, since pack divides 32, so the store addresses are cursors stepped by 32 slots per round), and its
// membership bits (byte qi: bit k % pack when logical row qi has the block). An entry's bits are OR-ed over its lanes
// by a segmented inclusive scan (slot s takes lane L - off when s >= off), so the entry's last unit (slot pack - 1, or
// the row's last unit) holds them all and stores them; an entry that continues into the next round (or stretch) passes
// its bits on through `carry`, which lane 0 of the next round adds. The padding slots (-1) of the last entry follow.
template <int kCq>
__device__ __forceinline__ void emit_packed_row(const UnitRules& ur, const RowBitmap<kCq>& r, std::int32_t n_units,
                                                std::int32_t n_row, int desc, std::int32_t* __restrict__ g_row,
                                                MemberWord<kCq>* __restrict__ m_row, const std::uint8_t* lut) {
  using Bits = std::conditional_t<kCq == 8, std::uint64_t, std::uint32_t>;  // bit qi * 8 + slot < 32 for c_q <= 4
  const int lane = threadIdx.x % 32;
  const int pack = ur.pack;
  const int log_pack = log2_factor(pack);
  const auto row_saddr = static_cast<std::uint32_t>(__cvta_generic_to_shared(r.bm));
  const std::int32_t flip = n_row - 1;  // desc: entry i of the row -> flip - i
  const int step = desc ? -1 : 1;
  Bits carry = 0;         // bits of the entry that the previous round left open (0 when none)
  std::int32_t done = 0;  // units of the row before this stretch
  for (std::int32_t w0 = 0; w0 < r.words; w0 += 32) {
    const std::int32_t w = w0 + lane;
    const std::uint32_t u = w < r.words ? r.union_word(w) : 0u;
    if (__ballot_sync(kFull, u != 0) == 0) continue;  // warp-uniform: no block in these 32 words
    const std::int32_t count = __popc(u);
    const std::int32_t first = warp_exclusive_scan(count, lane);
    const std::int32_t total = __shfl_sync(kFull, first + count, 31);
    const std::int32_t k0 = done + lane;  // the lane's row rank in the first round
    const int slot = k0 & (pack - 1);     // the same in every round of the stretch
    // Slot index from the row's first gather slot: asc k; desc (flip - k / pack) * pack + slot.
    std::int32_t g_at = desc ? flip * pack + 2 * slot - k0 : k0;
    std::int32_t m_at = desc ? flip - (k0 >> log_pack) : k0 >> log_pack;
    const std::int32_t m_step = step * (32 >> log_pack);
#pragma unroll 1
    for (std::int32_t base = 0; base < total; base += 32, g_at += 32 * step, m_at += m_step) {
      const std::int32_t e = base + lane;
      const int owner = warp_owner_lane(first, e);
      const std::int32_t k = e - __shfl_sync(kFull, first, owner);  // unit inside the owner's word
      const std::uint32_t h = __shfl_sync(kFull, u, owner);
      Bits bits = 0;
      if (e < total) {
        const int b = nth_set_bit(h, k, lut);
        const std::int32_t ow = w0 + owner;
        g_row[g_at] = ow * 32 + b;
        if (m_row) bits = static_cast<Bits>(span_bits<kCq>(row_saddr, ow, b, 0x01010101u)) << slot;
      }
      if (m_row) {  // warp-uniform
        if (lane == 0) bits |= carry;
#pragma unroll
        for (int off = 1; off < kMaxMappingFactor; off <<= 1) {
          if (off < pack) {  // warp-uniform
            const Bits up = __shfl_up_sync(kFull, bits, off);  // lanes below off get their own bits: OR is a no-op
            if (slot >= off) bits |= up;
          }
        }
        const int last = min(31, total - 1 - base);  // the round's last unit
        carry = ((done + base + last) & (pack - 1)) != pack - 1 ? __shfl_sync(kFull, bits, last) : Bits{0};
        if (e < total && (slot == pack - 1 || done + e == n_units - 1))
          m_row[m_at] = static_cast<MemberWord<kCq>>(bits);  // bytes qi < kCq: the rest are zero
      }
    }
    done += total;
  }
  const std::int32_t pad = n_units + lane;  // padding slots of the last entry: fewer than pack
  if (pad < n_row * pack) {
    const std::int32_t de = desc ? flip - (pad >> log_pack) : pad >> log_pack;
    g_row[de * pack + (pad & (pack - 1))] = -1;
  }
}

// The byte select table in global memory, copied into each CTA's shared memory.
__device__ const ByteSelectTable kByteSelectTable = make_byte_select_table();

// Entry offsets (c_q > 1: the tile rows are never mu(M)'s rows): kAligned, row-aligned (r_kv times mu(M)'s offset of
// the row's first logical row; the end into tile_ends; no look-back, no CTA barrier); else compact, from the
// look-back. Both written to tile_offsets. kCq: p.c_q (2, 4 or 8); kPacked: p.pack != 0 (gather slots), else a span
// form (kv_tile).
template <int kCq, bool kPacked, bool kAligned>
__global__ void __launch_bounds__(kThreads, kMinCtasSpan)
    rows_single_pass_kernel(PrepParams p, const std::int32_t* __restrict__ row_offsets,
                            const std::int32_t* __restrict__ cols, std::int32_t* __restrict__ tile_offsets,
                            std::int32_t* __restrict__ tile_ends, LookBackState lb, std::int32_t words,
                            std::int32_t* __restrict__ kv_tile, MemberWord<kCq>* __restrict__ member,
                            std::int32_t* __restrict__ gather, int desc) {
  if (p.gated_off()) return;  // speculative preparation of a mask that did not pass (Runtime)
  extern __shared__ uint4 bitmaps_v[];  // [kWarps][words][kCq] words (16-byte aligned for the vector loads)
  __shared__ std::int32_t bounds[kWarps][kMaxMappingFactor + 1];
  __shared__ std::int32_t row_entries[kWarps];
  __shared__ std::int32_t cta_ticket, cta_base;
  __shared__ uint4 lut_v[sizeof(ByteSelectTable) / sizeof(uint4)];
  static_assert(sizeof(ByteSelectTable) == kThreads * sizeof(uint4));
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  lut_v[threadIdx.x] = reinterpret_cast<const uint4*>(&kByteSelectTable)[threadIdx.x];  // used after __syncthreads
  const std::int32_t rows = static_cast<std::int32_t>(p.tile_rows());
  const std::int32_t tile = kAligned ? static_cast<std::int32_t>(blockIdx.x) : lookback_ticket(lb, cta_ticket);
  const std::int32_t row = tile * kWarps + warp;
  const bool has_row = row < rows;  // warp-uniform
  const RowBitmap<kCq> r{reinterpret_cast<std::uint32_t*>(bitmaps_v) + warp * kCq * words, words};
  if (has_row) load_row<kCq>(p, row_offsets, cols, row, r.bm, words, bounds[warp]);
  const UnitRules ur(p);  // after load_row: its fields would be live (and spilled at c_q = 8) across the loads
  const std::int32_t n_count = has_row ? count_row(ur, r) : 0;  // entries (span) or units (packed)
  const std::int32_t n_row = kPacked ? (n_count + ur.pack - 1) >> log2_factor(ur.pack) : n_count;
  std::int64_t o = 0;
  if constexpr (kAligned) {
    __syncthreads();  // the byte select table is in shared memory (the compact form's barriers order it there)
    if (!has_row) return;
    o = static_cast<std::int64_t>(bounds[warp][0]) * ur.r_kv;
    if (lane == 0) {
      tile_offsets[row] = static_cast<std::int32_t>(o);
      tile_ends[row] = static_cast<std::int32_t>(o + n_row);
      if (row == rows - 1) {  // the extent: r_kv times the end of the last logical row (mu(M)'s nnz)
        const std::int32_t t = row % static_cast<std::int32_t>(p.rows_per_head);  // the row inside its mask head
        const int nq = min(kCq, static_cast<int>(p.n_qb) - t * kCq);
        tile_offsets[rows] = bounds[warp][nq] * ur.r_kv;
      }
    }
  } else {
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
  }
  if (!has_row || n_row == 0) return;
  const auto* lut = reinterpret_cast<const std::uint8_t*>(lut_v);
  if constexpr (kPacked) {
    emit_packed_row<kCq>(ur, r, n_count, n_row, desc, gather + o * ur.pack, p.membership ? member + o : nullptr,
                         lut);
  } else {
    const std::int64_t first_at = desc ? o + n_row - 1 : o;  // where the row's entry 0 goes
    emit_span_row<kCq>(ur, r, desc ? -1 : 1, kv_tile + first_at, p.membership ? member + first_at : nullptr, lut);
  }
}

std::int32_t bitmap_words(const PrepParams& p) { return static_cast<std::int32_t>((p.n_kvb + 31) / 32); }

std::int64_t smem_bytes(const PrepParams& p) { return std::int64_t{kWarps} * p.c_q * bitmap_words(p) * 4; }

// The kernel for kCq = p.c_q, the KV form and the layout (row-aligned when tile_ends is set); membership words of
// kCq bytes (member_bytes).
template <int kCq>
void launch_rows_cq(const PrepParams& p, unsigned ctas, std::size_t smem, const std::int32_t* row_offsets,
                    const std::int32_t* cols, std::int32_t* tile_offsets, std::int32_t* tile_ends, LookBackState lb,
                    std::int32_t* kv_tile, void* member, std::int32_t* gather, int desc, cudaStream_t stream) {
  const std::int32_t words = bitmap_words(p);
  auto* m = static_cast<MemberWord<kCq>*>(member);
  auto launch = [&](auto packed, auto aligned) {
    rows_single_pass_kernel<kCq, decltype(packed)::value, decltype(aligned)::value>
        <<<ctas, kThreads, smem, stream>>>(p, row_offsets, cols, tile_offsets, tile_ends, lb, words, kv_tile, m,
                                           gather, desc);
  };
  using T = std::true_type;
  using F = std::false_type;
  if (p.pack) {
    tile_ends ? launch(T{}, T{}) : launch(T{}, F{});
  } else {
    tile_ends ? launch(F{}, T{}) : launch(F{}, F{});
  }
}

// The kernel for p.c_q (2, 4 or 8) and the KV form.
void launch_rows(const PrepParams& p, unsigned ctas, std::size_t smem, const std::int32_t* row_offsets,
                 const std::int32_t* cols, std::int32_t* tile_offsets, std::int32_t* tile_ends, LookBackState lb,
                 std::int32_t* kv_tile, void* member, std::int32_t* gather, int desc, cudaStream_t stream) {
  if (p.c_q == 2) {
    launch_rows_cq<2>(p, ctas, smem, row_offsets, cols, tile_offsets, tile_ends, lb, kv_tile, member, gather, desc,
                      stream);
  } else if (p.c_q == 4) {
    launch_rows_cq<4>(p, ctas, smem, row_offsets, cols, tile_offsets, tile_ends, lb, kv_tile, member, gather, desc,
                      stream);
  } else {
    launch_rows_cq<8>(p, ctas, smem, row_offsets, cols, tile_offsets, tile_ends, lb, kv_tile, member, gather, desc,
                      stream);
  }
}

}  // namespace

std::int64_t tile_rows_lookback_words(const PrepParams& p) {
  return detail::lookback_words((p.tile_rows() + kWarps - 1) / kWarps);
}

// Packed KV with c_q > 1 is built here too (emit_packed_row). An earlier one-pass packed emission, in which one lane
// built each packed entry by walking the bitmap, took 214 / 256 / 309 us for kv64p2 / p4 / p8 on the H200 against
// 160 us for the two-pass builder (bench/NOTES.md, "Launch preparation, third pass"; git history at d5a7fbb): a
// serial, divergent walk per lane and per-lane scattered stores. emit_packed_row expands one unit per lane as the
// span emission does (bench/NOTES.md, "Packed KV with c_q > 1 on the single-pass builder").
bool tile_rows_single_pass_fits(const PrepParams& p) {
  if (p.c_q == 1) return true;  // launch_prep_rows_stream.cu
  return (p.c_q == 2 || p.c_q == 4 || p.c_q == 8) && smem_bytes(p) <= kMaxSmemBytes;
}

bool build_tile_rows_single_pass(const PrepParams& p, const std::int32_t* row_offsets, const std::int32_t* cols,
                                 std::int32_t* tile_offsets, std::int32_t* tile_ends, std::uint64_t* lookback,
                                 std::int32_t* kv_tile, void* member, std::int32_t* gather, cudaStream_t stream) {
  const std::int64_t rows = p.tile_rows();
  if (rows == 0 || p.c_q == 1 || !tile_rows_single_pass_fits(p)) return false;
  const auto ctas = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
  launch_rows(p, ctas, static_cast<std::size_t>(smem_bytes(p)), row_offsets, cols, tile_offsets, tile_ends,
              detail::lookback_state(lookback), kv_tile, member, gather, p.traversal == 1 ? 1 : 0, stream);
  TESSERA_CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace tessera::prep
