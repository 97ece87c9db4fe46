#pragma once
// Single-pass prefix sum over the CTAs of one launch (decoupled look-back), for the launch-preparation builders
// that produce a per-CTA count and must write at the exclusive prefix of the counts of all earlier CTAs in the
// same pass (tile-row entries, split-KV work items). Device code only.
//
// State: one 64-bit status word per ticket and two counters (ticket, done), all zero before the launch. A CTA takes a
// ticket (its position in the prefix order: earlier tickets belong to CTAs already running, so waiting on them
// cannot deadlock), publishes its aggregate, and one warp reads the statuses of the 32 preceding tickets at a time
// until it meets an inclusive prefix. The last CTA to finish clears the state again, so every launch leaves it zero
// (allocation clears it once; no reset launch; safe to capture in a CUDA graph). A persistent CTA takes several
// tickets, one after another (launch_prep_rows_stream_persistent.cu); it publishes each aggregate before it waits on
// any look-back, so the same argument holds.
// Status word: flag in bits 62-63 (0 = not yet published, 1 = aggregate, 2 = inclusive prefix), value in bits
// 0-61. Values are sums of non-negative counts whose total stays below 2^62 (callers' totals fit int32 fields).
#include <cuda/atomic>

#include <cstdint>

#include "cuda/launch_prep_warp.cuh"

namespace tessera::prep::detail {

struct LookBackState {
  std::uint64_t* status;    ///< [CTAs of the launch]
  std::uint32_t* counters;  ///< [2]: ticket, done
};

/// 64-bit words of look-back state for a launch of `ctas` CTAs (statuses + counters).
constexpr std::int64_t lookback_words(std::int64_t ctas) { return ctas + 1; }

/// Splits a buffer of lookback_words(ctas) 64-bit words into counters (word 0) and statuses.
inline LookBackState lookback_state(std::uint64_t* words) {
  return {words + 1, reinterpret_cast<std::uint32_t*>(words)};
}

inline constexpr std::uint64_t kLbAggregate = std::uint64_t{1} << 62;
inline constexpr std::uint64_t kLbInclusive = std::uint64_t{2} << 62;
inline constexpr std::uint64_t kLbValue = (std::uint64_t{1} << 62) - 1;

__device__ __forceinline__ void lb_store(std::uint64_t* w, std::uint64_t v) {
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>(*w).store(v, cuda::memory_order_relaxed);
}

__device__ __forceinline__ std::uint64_t lb_load(std::uint64_t* w) {
  return cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>(*w).load(cuda::memory_order_relaxed);
}

__device__ __forceinline__ std::uint64_t warp_sum_u64(std::uint64_t v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

/// All threads of the CTA: the CTA's ticket (0, 1, ... in the order CTAs start). `slot` is a shared int.
__device__ __forceinline__ std::int32_t lookback_ticket(const LookBackState& s, std::int32_t& slot) {
  if (threadIdx.x == 0) slot = static_cast<std::int32_t>(atomicAdd(s.counters, 1u));
  __syncthreads();
  return slot;
}

/// One full warp: publishes the aggregate of ticket `tile` (ticket 0: its inclusive prefix at once), without
/// waiting for anything. lookback_resolve() then finishes the ticket's look-back.
__device__ __forceinline__ void lookback_publish(const LookBackState& s, std::int32_t tile, std::uint64_t aggregate) {
  if (threadIdx.x % 32 == 0) lb_store(s.status + tile, (tile == 0 ? kLbInclusive : kLbAggregate) | aggregate);
}

/// One full warp, after lookback_publish(s, tile, aggregate): returns (on every lane) the sum of the aggregates of
/// tickets 0 .. tile-1 and publishes the inclusive prefix of `tile`. The walk reads the statuses of 32 * kSpan
/// preceding tickets per step (kSpan per lane, all loads in flight) until it meets an inclusive prefix; it waits
/// only on earlier tickets, whose holders publish their aggregates without waiting on anything.
template <int kSpan = 1>
__device__ __forceinline__ std::uint64_t lookback_resolve(const LookBackState& s, std::int32_t tile,
                                                          std::uint64_t aggregate) {
  if (tile == 0) return 0;
  const int lane = threadIdx.x % 32;
  std::uint64_t exclusive = 0;
  for (std::int32_t end = tile;; end -= 32 * kSpan) {
    std::uint64_t st[kSpan];  // st[j] on lane L: the status of ticket end - 1 - 32 j - L
    for (;;) {
      bool ready = true;
#pragma unroll
      for (int j = 0; j < kSpan; ++j) {
        const std::int32_t t = end - 1 - 32 * j - lane;
        st[j] = t >= 0 ? lb_load(s.status + t) : kLbInclusive;  // before ticket 0: inclusive prefix 0
        ready = ready && st[j] != 0;
      }
      if (__all_sync(kFull, ready)) break;
      __nanosleep(32);
    }
    // The nearest inclusive prefix (row j_stop, lane stop) ends the walk; sum the values up to it.
    int j_stop = kSpan, stop = 31;
#pragma unroll
    for (int j = 0; j < kSpan; ++j) {
      const unsigned inclusive = __ballot_sync(kFull, (st[j] & ~kLbValue) == kLbInclusive);
      if (j_stop == kSpan && inclusive) j_stop = j, stop = __ffs(inclusive) - 1;
    }
    std::uint64_t part = 0;
#pragma unroll
    for (int j = 0; j < kSpan; ++j)
      if (j < j_stop || (j == j_stop && lane <= stop)) part += st[j] & kLbValue;
    exclusive += warp_sum_u64(part);
    if (j_stop < kSpan) break;
  }
  if (lane == 0) lb_store(s.status + tile, kLbInclusive | (exclusive + aggregate));
  return exclusive;
}

/// One full warp: publishes the aggregate of ticket `tile` and returns (on every lane) the sum of the aggregates of
/// tickets 0 .. tile-1; then publishes the inclusive prefix.
__device__ __forceinline__ std::uint64_t lookback_exclusive(const LookBackState& s, std::int32_t tile,
                                                            std::uint64_t aggregate) {
  lookback_publish(s, tile, aggregate);
  return lookback_resolve(s, tile, aggregate);
}

/// One full warp of the CTA (the one that did the CTA's look-backs), once the CTA no longer reads or writes the
/// state (its last ticket taken, its last look-back done): the last of the launch's `participants` CTAs to get here
/// clears the statuses of tickets 0 .. tickets-1 and the counters, with this warp. No CTA barrier: the CTA's other
/// warps do not wait for the counter's round trip (a CTA-wide barrier there cost about 8 % of the streaming
/// builder's warp time).
__device__ __forceinline__ void lookback_finish_warp(const LookBackState& s, std::int32_t participants,
                                                     std::int32_t tickets) {
  const int lane = threadIdx.x % 32;
  unsigned last = 0;
  if (lane == 0) {
    __threadfence();  // this CTA's status reads are complete before it counts itself done
    last = atomicAdd(s.counters + 1, 1u) == static_cast<unsigned>(participants - 1);
  }
  if (!__shfl_sync(kFull, last, 0)) return;
  __threadfence();
  for (std::int32_t i = lane; i < tickets; i += 32) s.status[i] = 0;
  if (lane == 0) s.counters[0] = s.counters[1] = 0;
}

/// lookback_finish_warp for a launch that takes one ticket per CTA.
__device__ __forceinline__ void lookback_finish_warp(const LookBackState& s, std::int32_t ctas) {
  lookback_finish_warp(s, ctas, ctas);
}

}  // namespace tessera::prep::detail
