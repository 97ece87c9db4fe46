// Persistent streaming tile-row builder: the alternative to launch_prep_rows_stream.cu's one-CTA-per-ticket kernel
// for c_q == 1 plans with compact rows and a look-back (Coarsened, Refined and packed KV), run when
// DeviceTileMetadata::row_builder is RowBuilder::kPersistent (tests, benchmarks; since session 8 the default writes
// such rows row-aligned, without a look-back: core/row_builder_choice.hpp). Same output, same per-ticket method
// (launch_prep_rows_stream.cuh: 2 tile rows per worker warp, staged columns, ballot ranks); what
// changes is who waits for the decoupled look-back. In the streaming kernel 15 warps idle at a CTA barrier while
// warp 0 waits for its predecessors' counts (35-40 % of the warp samples on the H200). Here:
//  - The grid is the CTAs that are resident at once (SMs x CTAs per SM, from the occupancy API). A CTA takes tickets
//    (atomic counter, ticket order = prefix order) until they run out.
//  - 15 worker warps and one look-back warp (warp 15): 512 threads, 3 CTAs per SM at 40 registers as the streaming
//    kernel (with 16 workers + 1, ptxas allowed 32 registers at 3 CTAs per SM, and spilled). A ticket is 30 tile
//    rows, 2 per worker warp; the look-back warp scans them one per lane (lanes 30, 31 idle). Step k of a CTA, T_k
//    its k-th ticket:
//      workers:         stage + count T_k (buffer k % 2) | STEP | emit T_{k-1}
//      look-back warp:  finish T_{k-1}'s look-back, write its offsets, take T_{k+1} and load its column span
//                       (so the workers stage it without a dependent load) | STEP |
//                       scan T_k's counts, publish T_k's aggregate
//    T_{k-1}'s aggregate was published one step earlier, so its look-back runs while the workers stage and count
//    T_k; the workers wait on it only when it has not resolved within that time.
//  - Two buffers of staged columns (2 x 32 KB dynamic shared memory) and of row facts.
//  - One handoff per step: all 512 threads meet at a CTA barrier (STEP = __syncthreads) at one call site: the
//    kernel is a single loop whose step k is [role's part before] | __syncthreads | [role's part after], and every
//    thread reads the next ticket from shared memory after the barrier. Before it the workers have counted T_k and
//    the look-back warp has written T_{k-1}'s offsets and T_{k+1}'s number; after it the workers emit T_{k-1} and the
//    look-back warp scans T_k. The workers alone sync on WORKERS (a named barrier of 480 threads) before they
//    restage a buffer. (A first version ran one loop per role with bar.arrive / bar.sync handoffs; each side waited
//    for the other right after arriving, so one barrier per step has the same critical path. Racecheck reported
//    hazards on those handoffs, and still with one barrier per step while the two roles reached it from different
//    call sites, although the PTX memory model orders them and the output matched the CPU twins bit for bit.)
// Deadlock freedom: tickets are taken by running CTAs only. A CTA publishes T_k's aggregate once its workers counted
// T_k (nothing outside the CTA) and T_{k-1}'s look-back ended; that look-back waits only for tickets below T_{k-1}.
// By induction over tickets (all below t published => the look-back of t's predecessor in its CTA ends => t is
// published), every aggregate is published and every look-back ends, whether or not all CTAs are resident.
// State cleanup: each CTA's look-back warp counts the CTA done once, after its last look-back and its last ticket
// (the one past the end); the last of the grid clears the statuses of all tickets and the counters
// (lookback_finish_warp), so the state is zero again after every launch.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>

#include "core/launch_prep_rules.hpp"
#include "cuda/check.cuh"
#include "cuda/launch_prep_kernels.cuh"
#include "cuda/launch_prep_lookback.cuh"
#include "cuda/launch_prep_rows_stream.cuh"
#include "kernels/ptx/named_barrier.cuh"

namespace tessera::prep {

namespace {

using namespace detail;
using namespace stream;

constexpr int kPersistentThreads = kThreads;            // 512, as the streaming kernel
constexpr int kWorkerThreads = kPersistentThreads - 32;  // 15 worker warps
constexpr std::int32_t kRowsPerTicket = kWorkerThreads / 32 * kRowsPerWarp;  // 30
static_assert(kRowsPerTicket <= kRowsPerCta);  // one row per lane of the look-back warp
constexpr int kCtasPerSm = 3;  // 3 x 512 threads (<= 40 registers), 3 x (64 KB + row facts) of shared memory
constexpr int kLookBackSpan = 4;  // statuses per lane per look-back step: 128 tickets (a CTA's last one is ~grid back)
constexpr int kDynamicSmem = 2 * kStageCols * static_cast<int>(sizeof(std::int32_t));  // two staging buffers
// Named barrier id of the 480 worker threads (STEP, all 512 threads, is __syncthreads: barrier 0).
constexpr int kBarWorkers = 1;

struct PersistentShared {
  CtaRows rows[2];          // row facts of T_k in rows[k % 2]
  std::int32_t ticket[2];   // T_k in ticket[k % 2]
  std::int32_t span[2][2];  // T_k's columns [span[k % 2][0], span[k % 2][1]) in mu(M), for its staging
};

// The look-back warp: the columns of ticket t's rows (t < n_tiles) into span (lanes 0 and 1, one load each), so
// the workers start staging t without a dependent global load.
__device__ __forceinline__ void load_ticket_span(const PrepParams& p, const std::int32_t* __restrict__ row_offsets,
                                                 std::int32_t t, std::int32_t* span) {
  const int lane = threadIdx.x % 32;
  const std::int32_t rows = static_cast<std::int32_t>(p.tile_rows());
  if (lane < 2) span[lane] = __ldg(row_offsets + min((t + lane) * kRowsPerTicket, rows));
}

// The look-back warp's part of step k before the CTA barrier (see the file comment): finish T_{k-1}'s look-back
// (prev >= 0) and write its offsets, take T_{k+1} and load its column span. `total`: T_{k-1}'s entries.
__device__ __forceinline__ void lookback_before(const PrepParams& p, const std::int32_t* __restrict__ row_offsets,
                                                const LookBackState& lb, std::int32_t n_tiles, PersistentShared& sh,
                                                std::int32_t* __restrict__ tile_offsets, int k, bool more,
                                                std::int32_t prev, std::int32_t total) {
  const int lane = threadIdx.x % 32;
  std::uint32_t next = 0;
  if (more && lane == 0) next = atomicAdd(lb.counters, 1u);  // T_{k+1}; its round trip overlaps the walk
  if (prev >= 0) {
    const auto before =
        static_cast<std::int32_t>(lookback_resolve<kLookBackSpan>(lb, prev, static_cast<std::uint64_t>(total)));
    CtaRows& cr = sh.rows[(k + 1) & 1];
    const bool row = lane < kRowsPerTicket;
    write_cta_row_offsets(cr, p, prev, kRowsPerTicket, before, row ? cr.first[lane] : 0, row ? cr.entries[lane] : 0,
                          tile_offsets);
  }
  next = __shfl_sync(kFull, next, 0);
  if (more && static_cast<std::int32_t>(next) < n_tiles)
    load_ticket_span(p, row_offsets, static_cast<std::int32_t>(next), sh.span[(k + 1) & 1]);
  if (more && lane == 0) sh.ticket[(k + 1) & 1] = static_cast<std::int32_t>(next);
}

// The look-back warp's part of step k after the CTA barrier: scan T_k's row counts (exclusive scan kept in its
// CtaRows::first, read back at the end of its look-back in step k + 1) and publish T_k's aggregate, returned.
__device__ __forceinline__ std::int32_t lookback_after(const LookBackState& lb, PersistentShared& sh, int k,
                                                       std::int32_t cur) {
  const int lane = threadIdx.x % 32;
  CtaRows& cr = sh.rows[k & 1];
  const std::int32_t v = lane < kRowsPerTicket ? cr.entries[lane] : 0;
  const std::int32_t excl = warp_exclusive_scan(v, lane);
  const std::int32_t total = __shfl_sync(kFull, excl + v, 31);
  if (lane < kRowsPerTicket) cr.first[lane] = excl;
  lookback_publish(lb, cur, static_cast<std::uint64_t>(total));
  return total;
}

// The worker warps' part of step k before the CTA barrier: stage and count T_k = cur into buffer k % 2. Returns
// where T_k's columns are read: the first column of the staged copy, or -1 (not staged: global memory).
__device__ __forceinline__ std::int32_t workers_before(const PrepParams& p, const UnitRules& ur,
                                                       const std::int32_t* __restrict__ row_offsets,
                                                       const std::int32_t* __restrict__ cols, PersistentShared& sh,
                                                       std::int32_t* stage, int k, std::int32_t cur) {
  ptx::named_barrier_sync(kBarWorkers, kWorkerThreads);  // buffer k % 2 is free: T_{k-2}'s rows are written
  std::int32_t* st = stage + (k & 1) * kStageCols;
  std::int32_t first = 0;
  if (stage_columns_issue<kWorkerThreads>(cols, sh.span[k & 1][0], sh.span[k & 1][1], st, first)) {
    ptx::cp_async_wait<0>();
    ptx::named_barrier_sync(kBarWorkers, kWorkerThreads);
    count_cta_rows(p, ur, cur, kRowsPerTicket, row_offsets, SharedColumns{st, first}, sh.rows[k & 1]);
    return first;
  }
  count_cta_rows(p, ur, cur, kRowsPerTicket, row_offsets, GlobalColumns{cols}, sh.rows[k & 1]);
  return -1;
}

// The worker warps' part of step k after the CTA barrier: write T_{k-1}'s rows (columns staged from prev_first, or
// global memory when prev_first < 0). kMember == (p.membership != 0).
template <bool kMember>
__device__ __forceinline__ void workers_after(const PrepParams& p, const UnitRules& ur,
                                              const std::int32_t* __restrict__ cols, PersistentShared& sh,
                                              const std::int32_t* stage, int k, std::int32_t prev_first,
                                              std::int32_t* __restrict__ kv_tile, std::uint8_t* __restrict__ member,
                                              std::int32_t* __restrict__ gather, int desc) {
  CtaRows& cr = sh.rows[(k + 1) & 1];
  if (prev_first >= 0) {
    emit_cta_rows<RowOffsets::kLookBack, kMember>(p, ur, SharedColumns{stage + ((k + 1) & 1) * kStageCols, prev_first}, cr, desc,
                                 kv_tile, member, gather);
  } else {
    emit_cta_rows<RowOffsets::kLookBack, kMember>(p, ur, GlobalColumns{cols}, cr, desc, kv_tile, member, gather);
  }
}

// One loop for all 512 threads, so every thread meets every CTA barrier at the same call site: step k is
// [role before] | __syncthreads | [role after], and the ticket of the next step is read from shared memory by all.
// The loop ends after the step whose ticket is past the last (that step only writes T_{k-1}). kMember ==
// (p.membership != 0): the Refined KV kernel has no member code.
template <bool kMember>
__global__ void __launch_bounds__(kPersistentThreads, kCtasPerSm)
    rows_stream_persistent_kernel(PrepParams p, const std::int32_t* __restrict__ row_offsets,
                                  const std::int32_t* __restrict__ cols, std::int32_t* __restrict__ tile_offsets,
                                  LookBackState lb, std::int32_t* __restrict__ kv_tile,
                                  std::uint8_t* __restrict__ member, std::int32_t* __restrict__ gather, int desc,
                                  std::int32_t n_tiles) {
  if (p.gated_off()) return;  // speculative preparation of a mask that did not pass (Runtime)
  extern __shared__ __align__(16) std::int32_t stage[];  // [2][kStageCols]
  __shared__ PersistentShared sh;
  const bool lookback = threadIdx.x >= kWorkerThreads;  // warp 15
  if (lookback) {  // the look-back warp takes the first ticket
    std::uint32_t t0 = 0;
    if (threadIdx.x == kWorkerThreads) t0 = atomicAdd(lb.counters, 1u);
    t0 = __shfl_sync(kFull, t0, 0);
    if (threadIdx.x == kWorkerThreads) sh.ticket[0] = static_cast<std::int32_t>(t0);
    if (static_cast<std::int32_t>(t0) < n_tiles)
      load_ticket_span(p, row_offsets, static_cast<std::int32_t>(t0), sh.span[0]);
  }
  __syncthreads();
  const UnitRules ur(p);
  std::int32_t cur = sh.ticket[0];  // T_k, the same in every thread
  std::int32_t prev = -1, total = 0;  // look-back warp: T_{k-1} (-1: none) and its entries
  std::int32_t prev_first = -1;       // workers: where T_{k-1}'s columns are read (see workers_before)
  if (cur < n_tiles) {                // else the CTA's first ticket is past the last: nothing to do
    for (int k = 0;; ++k) {
      const bool more = cur < n_tiles;
      std::int32_t this_first = -1;
      if (lookback) {
        lookback_before(p, row_offsets, lb, n_tiles, sh, tile_offsets, k, more, prev, total);
      } else if (more) {
        this_first = workers_before(p, ur, row_offsets, cols, sh, stage, k, cur);
      }
      __syncthreads();  // T_k counted; T_{k-1}'s offsets written; T_{k+1}'s number and columns known
      if (lookback) {
        if (more) total = lookback_after(lb, sh, k, cur);
      } else if (k > 0) {
        workers_after<kMember>(p, ur, cols, sh, stage, k, prev_first, kv_tile, member, gather, desc);
      }
      if (!more) break;
      prev = cur;
      prev_first = this_first;
      cur = sh.ticket[(k + 1) & 1];
    }
  }
  if (lookback) lookback_finish_warp(lb, static_cast<std::int32_t>(gridDim.x), n_tiles);
}

// Resident CTAs of the persistent kernel rows_stream_persistent_kernel<kMember> on the current device (SMs x CTAs
// per SM), found once per device and kernel (devices 0..63; the kernel's shared-memory opt-in is set then too); 0
// when it cannot run there.
template <bool kMember>
int persistent_ctas() {
  static std::atomic<int> known[64];  // per device: 0 not yet asked, -1 cannot run, else the CTAs
  int dev = 0;
  TESSERA_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 64) {
    const int c = known[dev].load(std::memory_order_relaxed);
    if (c != 0) return std::max(c, 0);
  }
  const void* fn = reinterpret_cast<const void*>(&rows_stream_persistent_kernel<kMember>);
  int per_sm = 0, sms = 0;
  if (cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, kDynamicSmem) != cudaSuccess) {
    (void)cudaGetLastError();  // too little shared memory on this device: not an error, the caller falls back
  } else {
    TESSERA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, kPersistentThreads, kDynamicSmem));
    TESSERA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  }
  const int ctas = per_sm * sms > 0 ? per_sm * sms : -1;
  if (dev < 64) known[dev].store(ctas, std::memory_order_relaxed);
  return std::max(ctas, 0);
}

}  // namespace

bool launch_tile_rows_stream_persistent(const PrepParams& p, const std::int32_t* row_offsets, const std::int32_t* cols,
                                        std::int32_t* tile_offsets, std::uint64_t* lookback, std::int32_t* kv_tile,
                                        std::uint8_t* member, std::int32_t* gather, cudaStream_t stream) {
  const std::int64_t rows = p.tile_rows();
  if (rows == 0 || p.c_q != 1 || tile_offsets_are_mask_offsets(p) || p.traversal == 2) return false;
  const bool with_member = p.membership != 0;  // Coarsened or packed KV; Refined KV has none
  const int resident = with_member ? persistent_ctas<true>() : persistent_ctas<false>();
  if (resident == 0) return false;
  const auto n_tiles = static_cast<std::int32_t>((rows + kRowsPerTicket - 1) / kRowsPerTicket);
  const auto ctas = static_cast<unsigned>(std::min<std::int64_t>(n_tiles, resident));
  const int desc = p.traversal == 1 ? 1 : 0;  // ascending or descending (run-major: the streaming kernel)
  if (with_member) {
    rows_stream_persistent_kernel<true><<<ctas, kPersistentThreads, kDynamicSmem, stream>>>(
        p, row_offsets, cols, tile_offsets, detail::lookback_state(lookback), kv_tile, member, gather, desc, n_tiles);
  } else {
    rows_stream_persistent_kernel<false><<<ctas, kPersistentThreads, kDynamicSmem, stream>>>(
        p, row_offsets, cols, tile_offsets, detail::lookback_state(lookback), kv_tile, nullptr, gather, desc,
        n_tiles);
  }
  TESSERA_CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace tessera::prep
