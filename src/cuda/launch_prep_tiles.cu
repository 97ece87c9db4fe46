// GPU tile-row builders: refined tile lists, coarsened tile lists with membership bitmasks, packed KV index
// lists, and the traversal order. Output is defined by core/launch_prep_rules.hpp (build_tile_row,
// reorder_tile_row) and equals the CPU twins bit for bit; only the method differs. The streaming builder
// (launch_prep_rows_stream.cu) serves every plan with c_q == 1 (run-major included), the single-pass bitmap builder
// (launch_prep_rows_single_pass.cu) plans with c_q > 1 whose bitmaps fit in shared memory; this file holds the
// driver, the two-pass builder for the rest (c_q > 1 with very long rows) and the run-major reorder (c_q > 1):
//  - Two-pass builder: one warp per tile row. The warp walks the row's kv-block space in windows of 1,024
//    logical kv blocks (skipping windows no cursor reaches). For each of the row's c_q logical rows it loads the
//    window's columns coalesced (32 per step) and sets them in a per-row bitmap in shared memory (32 words per
//    logical row). Lane L then owns word L of the window: the union of the c_q words gives the active kv units (a
//    unit = c_kv adjacent blocks; c_kv in {1, 2, 4, 8} divides 32, so a unit never straddles a word), and a warp
//    scan of the per-lane counts gives every unit its entry position. The write pass then expands the window 32
//    entries at a time, one per lane (each lane finds its word by a shuffle binary search over the scan, its
//    unit with __fns); membership bits are shifts of the owner's c_q words. No serial merge, no 64-bit division.
//  - Counting: the bitmap kernel runs in count mode and CUB scans the counts into the tile-row offsets.
//  - Traversal: descending is an index permutation inside the write pass; run-major (c_q > 1) writes ascending
//    entries to scratch, then one warp per row (rows of <= 256 entries first copied into shared memory) finds the runs
//    (ballot over 32 entries at a time) and emits them by decreasing length (one sweep over the run list per
//    distinct length, positions from a ballot prefix).
#include <cub/device/device_scan.cuh>

#include <climits>

#include "core/launch_prep_rules.hpp"
#include "core/row_builder_choice.hpp"
#include "cuda/check.cuh"
#include "cuda/launch_prep_kernels.cuh"
#include "cuda/launch_prep_warp.cuh"
#include "cuda/member_word.cuh"
#include "tessera/error.hpp"

namespace tessera::prep {

namespace {

using namespace detail;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kWinWords = 32;
constexpr int kWinCols = kWinWords * 32;

// One warp per tile row. kWrite = false: counts[row] = entries (counts[rows] = 0 for the scan). kWrite = true:
// writes the row at tile_offsets[row] in ascending (traversal 0 or 2, the latter into scratch) or descending order.
// Member: membership word (MemberWord<member_bytes(p)>; member_word.cuh ORs the packed form's shared entries).
template <bool kWrite, class Member>
__global__ void __launch_bounds__(kThreads) tile_rows_kernel(PrepParams p, const std::int32_t* __restrict__ row_offsets,
                                                             const std::int32_t* __restrict__ cols,
                                                             std::int32_t* __restrict__ offsets_or_counts,
                                                             std::int32_t* __restrict__ kv_tile,
                                                             Member* __restrict__ member,
                                                             std::int32_t* __restrict__ gather, int desc) {
  if (p.gated_off()) return;  // speculative preparation of a mask that did not pass (Runtime)
  __shared__ std::uint32_t bitmap_all[kWarps][kMaxMappingFactor][kWinWords];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const std::int32_t rows = static_cast<std::int32_t>(p.tile_rows());
  const std::int32_t row = static_cast<std::int32_t>(blockIdx.x) * kWarps + warp;
  if (row >= rows) {
    if (!kWrite && row == rows && lane == 0) offsets_or_counts[rows] = 0;
    return;  // warp-uniform
  }
  std::uint32_t(*bm)[kWinWords] = bitmap_all[warp];
  const std::int32_t rph = static_cast<std::int32_t>(p.rows_per_head);
  const std::int32_t n_qb = static_cast<std::int32_t>(p.n_qb);
  const std::int32_t mh = row / rph;
  const std::int32_t t = row - mh * rph;
  const int c_q = p.c_q;
  const int nq = min(c_q, n_qb - t * c_q);  // >= 1: t < ceil(n_qb / c_q)
  // Lane qi (< nq) holds the cursor of logical row qi.
  std::int32_t cur = 0, end = 0;
  if (lane < nq) {
    const std::int64_t lr = static_cast<std::int64_t>(mh) * n_qb + static_cast<std::int64_t>(t) * c_q + lane;
    cur = row_offsets[lr];
    end = row_offsets[lr + 1];
  }
  const UnitRules ur(p);
  const int c_kv = ur.c_kv;
  const int log_ckv = ur.log_ckv;
  const std::uint32_t group_mask = ur.group_mask;
  const int pack = ur.pack;
  const int r_kv = ur.r_kv;
  const RefineDivider rd(r_kv);
  const int log_pack = pack ? log2_factor(pack) : 0;
  std::int64_t o = 0;
  std::int32_t n_row = 0;
  if (kWrite) {
    o = offsets_or_counts[row];
    n_row = offsets_or_counts[row + 1] - static_cast<std::int32_t>(o);
    if (pack && p.membership) {
      // Packed entries shared by several lanes (or windows) are OR-ed atomically: clear the row first.
      for (std::int32_t e = lane; e < n_row; e += 32) member_clear(member + o + e);
      __syncwarp();
    }
  }
  std::int32_t done = 0;  // entries (span) or units (packed) of the row emitted so far
  for (;;) {
    const std::int32_t next = warp_min(cur < end ? __ldg(cols + cur) : INT_MAX);
    if (next == INT_MAX) break;  // warp-uniform
    const std::int32_t win = next & ~(kWinCols - 1);
    for (int qi = 0; qi < nq; ++qi) bm[qi][lane] = 0;
    __syncwarp();
    for (int qi = 0; qi < nq; ++qi) {
      std::int32_t c = __shfl_sync(kFull, cur, qi);
      const std::int32_t e = __shfl_sync(kFull, end, qi);
      while (c < e) {
        const std::int32_t idx = c + lane;
        const std::int32_t v = idx < e ? __ldg(cols + idx) : INT_MAX;
        const bool in = v - win < kWinCols;  // v >= win: columns below win were consumed by earlier windows
        const unsigned bal = __ballot_sync(kFull, in);
        if (in) atomicOr(&bm[qi][(v - win) >> 5], 1u << (v & 31));
        c += __popc(bal);
        if (bal != kFull) break;
      }
      if (lane == qi) cur = c;
    }
    __syncwarp();
    std::uint32_t m[kMaxMappingFactor];
    std::uint32_t u = 0;
#pragma unroll
    for (int qi = 0; qi < kMaxMappingFactor; ++qi) {
      m[qi] = qi < nq ? bm[qi][lane] : 0u;
      u |= m[qi];
    }
    __syncwarp();  // the bitmap is cleared for the next window only after every lane read it
    const std::uint32_t heads = group_heads(u, c_kv);
    const std::int32_t word_col = win + lane * 32;
    const std::int32_t count = ur.count(heads, word_col);
    const std::int32_t excl = warp_exclusive_scan(count, lane);
    const std::int32_t total = __shfl_sync(kFull, excl + count, 31);
    if (kWrite) {
      // Expansion 32 at a time with one entry (span) or unit (packed) per lane: lane L takes the window's rank
      // e = b0 + L, finds the word that holds it (the largest lane whose exclusive count is <= e: a binary search
      // with shuffles), the unit inside that word (the n-th group head, __fns) and, for span forms, the entry inside
      // the unit. Consecutive lanes write consecutive entries and no lane loops over its own word's units.
      for (std::int32_t b0 = 0; b0 < total; b0 += 32) {
        const std::int32_t e = b0 + lane;
        const int owner = warp_owner_lane(excl, e);
        const std::int32_t k = e - __shfl_sync(kFull, excl, owner);
        const std::uint32_t h = __shfl_sync(kFull, heads, owner);
        std::uint32_t mo[kMaxMappingFactor];  // the owner's words of the c_q logical rows (membership only)
        if (p.membership) {
#pragma unroll
          for (int qi = 0; qi < kMaxMappingFactor; ++qi) mo[qi] = __shfl_sync(kFull, m[qi], owner);
        }
        const bool valid = e < total;
        const std::int32_t col0 = win + owner * 32;
        if (!pack) {
          if (!valid) continue;
          const int b = __fns(h, 0, rd.div(k) + 1);  // units before the ragged last one have r_kv entries
          const std::int32_t unit = (col0 + b) >> log_ckv;
          const std::int32_t kk = done + e;
          const std::int64_t d = o + (desc ? n_row - 1 - kk : kk);
          kv_tile[d] = unit * r_kv + rd.mod(k);
          if (p.membership) {
            std::uint64_t bits = 0;
#pragma unroll
            for (int qi = 0; qi < kMaxMappingFactor; ++qi)
              bits |= static_cast<std::uint64_t>((mo[qi] >> b) & group_mask) << (qi * 8);
            member[d] = static_cast<Member>(bits);
          }
        } else {
          const int b = valid ? __fns(h, 0, k + 1) : 0;
          const std::int32_t rank = done + e;  // unit rank in the row
          const std::int32_t ent = rank >> log_pack, slot = rank & (pack - 1);
          const std::int64_t de = o + (desc ? n_row - 1 - ent : ent);
          if (valid) gather[de * pack + slot] = (col0 + b) >> log_ckv;
          if (p.membership) {
            std::uint64_t bits = 0;
            if (valid) {
#pragma unroll
              for (int qi = 0; qi < kMaxMappingFactor; ++qi)
                bits |= static_cast<std::uint64_t>((mo[qi] >> b) & 1u) << (qi * 8 + slot);
            }
            // OR over the lanes of one entry (at most `pack` consecutive lanes), then its first lane in this
            // batch ORs it in (an entry may continue in the next batch or window; the row was cleared).
            bits = warp_segmented_or_down(bits, ent, pack);
            const std::int32_t prev = __shfl_up_sync(kFull, ent, 1);
            if (valid && (lane == 0 || prev != ent)) member_atomic_or(member + de, bits);
          }
        }
      }
    }
    done += total;
  }
  if (!kWrite) {
    if (lane == 0) offsets_or_counts[row] = pack ? (done + pack - 1) / pack : done;
  } else if (pack) {
    // Padding slots of the last entry.
    const std::int32_t g = done + lane;
    if (g < n_row * pack) {
      const std::int32_t e = g / pack, slot = g - e * pack;
      gather[(o + (desc ? n_row - 1 - e : e)) * pack + slot] = -1;
    }
  }
}

// Rows of the run-major reorder held in shared memory (entries, membership, run starts), per warp.
constexpr int kRunStageEntries = 256;  // entries (and run starts) of a staged row
constexpr int kRunStageInts = 512;     // kv tiles (span) or gather slots (packed) of a staged row

// Run-major traversal of one row per warp: ascending entries in (kv_in, mem_in, gather_in) -> outputs.
// runs_all: scratch, the run starts of the row (at most n). A row of at most kRunStageEntries entries (and
// kRunStageInts kv / gather ints) is first copied into shared memory with independent coalesced loads, so the run
// search and the sweeps read shared memory instead of chains of dependent global loads; longer rows work in place.
// Member: membership word (MemberWord<member_bytes(p)>).
template <class Member>
__global__ void run_major_kernel(PrepParams p, const std::int32_t* __restrict__ tile_offsets,
                                 const std::int32_t* __restrict__ kv_in, const Member* __restrict__ mem_in,
                                 const std::int32_t* __restrict__ gather_in, std::int32_t* __restrict__ runs_all,
                                 std::int32_t* __restrict__ kv_out, Member* __restrict__ mem_out,
                                 std::int32_t* __restrict__ gather_out) {
  if (p.gated_off()) return;  // speculative preparation of a mask that did not pass (Runtime)
  __shared__ std::int32_t stage_ints[kWarps][kRunStageInts];
  __shared__ Member stage_member[kWarps][kRunStageEntries];
  __shared__ std::int32_t stage_runs[kWarps][kRunStageEntries];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const std::int32_t row = static_cast<std::int32_t>(blockIdx.x) * kWarps + warp;
  if (row >= static_cast<std::int32_t>(p.tile_rows())) return;  // warp-uniform
  const std::int64_t o = tile_offsets[row];
  const std::int32_t n = tile_offsets[row + 1] - static_cast<std::int32_t>(o);
  if (n == 0) return;
  const std::int64_t g = p.pack;
  const std::int32_t* ki = p.pack ? nullptr : kv_in + o;
  const Member* mi = p.membership ? mem_in + o : nullptr;
  const std::int32_t* gi = p.pack ? gather_in + o * g : nullptr;
  std::int32_t* ko = p.pack ? nullptr : kv_out + o;
  Member* mo = p.membership ? mem_out + o : nullptr;
  std::int32_t* go = p.pack ? gather_out + o * g : nullptr;
  std::int32_t* runs = runs_all + o;
  if (n <= kRunStageEntries && n * (p.pack ? p.pack : 1) <= kRunStageInts) {  // warp-uniform
    std::int32_t* si = stage_ints[warp];
    for (std::int32_t e = lane; e < n; e += 32)
      copy_entry(p, ki, mi, gi, e, si, stage_member[warp], si, e);
    __syncwarp();
    ki = p.pack ? nullptr : si;
    gi = p.pack ? si : nullptr;
    mi = p.membership ? stage_member[warp] : nullptr;
    runs = stage_runs[warp];
  }
  // Run starts, in ascending order.
  std::int32_t n_runs = 0;
  for (std::int32_t base = 0; base < n; base += 32) {
    const std::int32_t e = base + lane;
    const bool start = e < n && !continues_run(p, ki, gi, e);
    const unsigned bal = __ballot_sync(kFull, start);
    if (start) runs[n_runs + __popc(bal & lanes_below(lane))] = e;
    n_runs += __popc(bal);
  }
  __syncwarp();
  std::int32_t longest = 0;
  for (std::int32_t k = lane; k < n_runs; k += 32) longest = max(longest, (k + 1 < n_runs ? runs[k + 1] : n) - runs[k]);
  std::int32_t len = warp_max(longest);
  std::int32_t out = 0;
  // One sweep per distinct run length, longest first; runs of one length keep their ascending order.
  while (len > 0) {
    std::int32_t shorter = 0;
    for (std::int32_t kb = 0; kb < n_runs; kb += 32) {
      const std::int32_t k = kb + lane;
      std::int32_t s = 0, l = 0;
      if (k < n_runs) {
        s = runs[k];
        l = (k + 1 < n_runs ? runs[k + 1] : n) - s;
      }
      const bool sel = k < n_runs && l == len;
      if (k < n_runs && l < len) shorter = max(shorter, l);
      unsigned bal = __ballot_sync(kFull, sel);
      const std::int32_t dst = out + __popc(bal & lanes_below(lane)) * len;
      if (len < 32) {
        if (sel) {
          for (std::int32_t j = 0; j < len; ++j) copy_entry(p, ki, mi, gi, s + j, ko, mo, go, dst + j);
        }
      } else {
        while (bal) {  // long runs: the whole warp copies each one
          const int src_lane = __ffs(bal) - 1;
          bal &= bal - 1;
          const std::int32_t s2 = __shfl_sync(kFull, s, src_lane), d2 = __shfl_sync(kFull, dst, src_lane);
          for (std::int32_t j = lane; j < len; j += 32) copy_entry(p, ki, mi, gi, s2 + j, ko, mo, go, d2 + j);
        }
      }
      out += __popc(__ballot_sync(kFull, sel)) * len;
    }
    len = warp_max(shorter);
  }
}

unsigned row_blocks(std::int64_t rows) { return static_cast<unsigned>((rows + kWarps - 1) / kWarps); }

}  // namespace

bool row_aligned_gpu(const PrepParams& p) { return prefer_row_aligned(p) && tile_rows_single_pass_fits(p); }

void build_tile_rows_gpu(const PrepParams& p, const std::int32_t* row_offsets, const std::int32_t* cols,
                         TileRowBuffers& b, cudaStream_t stream, bool persistent_stream) {
  if (b.tile_ends != nullptr && !row_aligned_gpu(p))
    throw Error(ErrorCode::kInternal, "metadata.tile_row_ends", "row-aligned layout requested for a plan without it");
  const std::int64_t rows = p.tile_rows();
  const bool mask_offsets = tile_offsets_are_mask_offsets(p);
  // Direct KV: tile rows are the logical rows, entries are the columns, offsets are mu(M)'s.
  const std::int32_t* offsets = mask_offsets ? row_offsets : b.tile_offsets;
  // Run-major with c_q > 1: ascending rows into scratch, then the reorder (c_q == 1: the streaming builder writes it).
  const bool reorder = p.traversal == 2 && !run_major_in_emission(p);
  std::int32_t* kv_out = reorder ? b.tmp_kv : b.kv_tile;
  void* member_out = reorder ? b.tmp_member : b.member;
  std::int32_t* gather_out = reorder ? b.tmp_gather : b.gather;
  if (rows == 0) {
    if (!mask_offsets) TESSERA_CUDA_CHECK(cudaMemsetAsync(b.tile_offsets, 0, sizeof(std::int32_t), stream));
    return;
  }
  auto* member_out8 = static_cast<std::uint8_t*>(member_out);  // the streaming builders (c_q == 1): 1-byte words
  const bool persistent_done = persistent_stream && b.tile_ends == nullptr &&
                               launch_tile_rows_stream_persistent(p, row_offsets, cols, b.tile_offsets, b.lookback,
                                                                  kv_out, member_out8, gather_out, stream);
  if (!persistent_done &&
      !build_tile_rows_stream(p, row_offsets, cols, b.tile_offsets, b.tile_ends, b.lookback, kv_out, member_out8,
                              gather_out, b.runs, stream) &&
      !build_tile_rows_single_pass(p, row_offsets, cols, b.tile_offsets, b.tile_ends, b.lookback, kv_out,
                                   member_out, gather_out, stream)) {
    if (!mask_offsets) {
      tile_rows_kernel<false, std::uint64_t><<<row_blocks(rows + 1), kThreads, 0, stream>>>(
          p, row_offsets, cols, b.tile_offsets, nullptr, nullptr, nullptr, 0);
      TESSERA_CUDA_CHECK_LAUNCH();
      std::size_t temp = b.cub_temp_bytes;
      TESSERA_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(b.cub_temp, temp, b.tile_offsets, b.tile_offsets,
                                                       static_cast<int>(rows + 1), stream));
    }
    dispatch_member_word(member_bytes(p), [&](auto word) {
      using Member = decltype(word);
      tile_rows_kernel<true, Member><<<row_blocks(rows), kThreads, 0, stream>>>(
          p, row_offsets, cols, const_cast<std::int32_t*>(offsets), kv_out, static_cast<Member*>(member_out),
          gather_out, p.traversal == 1 ? 1 : 0);
    });
    TESSERA_CUDA_CHECK_LAUNCH();
  }
  if (reorder) {
    dispatch_member_word(member_bytes(p), [&](auto word) {
      using Member = decltype(word);
      run_major_kernel<Member><<<row_blocks(rows), kThreads, 0, stream>>>(
          p, offsets, b.tmp_kv, static_cast<const Member*>(b.tmp_member), b.tmp_gather, b.runs, b.kv_tile,
          static_cast<Member*>(b.member), b.gather);
    });
    TESSERA_CUDA_CHECK_LAUNCH();
  }
}

std::size_t tile_rows_cub_temp_bytes(std::int64_t rows) {
  std::size_t temp = 0;
  TESSERA_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, temp, static_cast<std::int32_t*>(nullptr),
                                                   static_cast<std::int32_t*>(nullptr), static_cast<int>(rows + 1)));
  return temp;
}

}  // namespace tessera::prep
