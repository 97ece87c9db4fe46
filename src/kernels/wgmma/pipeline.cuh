#pragma once
// The K and V stage rings (S and Config::kVStages stages), a "full" mbarrier per stage (the producer's TMA
// transaction completes it) and an "empty" one (one arrival per consumer warp releases it). One PipelineState per
// role and ring walks the stages; the phase flips when the stage index wraps. Producer and consumers walk the same
// entry sequence (one K and one V stage per KV tile of the work item), so they agree on every stage and phase by
// construction.
#include <cstdint>

#include "kernels/ptx/mbarrier.cuh"
#include "kernels/wgmma/config.cuh"

namespace tessera::kernels::wgmma {

/// Position in a ring of S stages: stage index and the parity of the phase a consumer waits for there.
template <int S>
struct PipelineState {
  int stage = 0;
  std::uint32_t phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == S) stage = 0, phase ^= 1u;
  }
};

/// Where the CTA's dynamic shared memory goes (config.cuh): the operands from the first 1024-byte boundary of the
/// window, the small region (barriers, item ring; Config::kSmallBytes) right after them, or with
/// Config::kSmallInGap in the gap below that boundary when it holds them. Either way it ends within kSmemBytes.
template <class Cfg>
struct SmemLayout {
  unsigned char* operands;  // 1024-byte aligned: Q, the K and V rings, (swapped) P^T and the column maxima
  unsigned char* small_region;     // 8-byte aligned: Barriers, then the item ring

  __device__ __forceinline__ explicit SmemLayout(unsigned char* raw_base) {
    const std::uint32_t raw = static_cast<std::uint32_t>(__cvta_generic_to_shared(raw_base));
    const std::uint32_t gap = ((raw + 1023u) & ~1023u) - raw;
    operands = raw_base + gap;
    small_region = Cfg::kSmallInGap && gap >= Cfg::kSmallBytes ? raw_base : operands + Cfg::kOperandBytes;
  }
};

/// The CTA's barriers and item ring, carved from the small region of SmemLayout.
template <class Cfg>
struct Barriers {
  std::uint64_t* q_full;   // [1]: Q has landed (persistent CTAs: and the item ring names the item)
  std::uint64_t* q_empty;  // [1], Cfg::kPersistent only: every consumer thread is done with Q
  std::uint64_t* k_full;   // [S]
  std::uint64_t* k_empty;  // [S]
  std::uint64_t* v_full;   // [kVStages]
  std::uint64_t* v_empty;  // [kVStages]
  std::int32_t* item_ring;  // [2], Cfg::kPersistent only (scheduler.cuh)

  __device__ __forceinline__ explicit Barriers(unsigned char* small_region) {
    auto* b = reinterpret_cast<std::uint64_t*>(small_region);
    q_full = b;
    q_empty = Cfg::kPersistent ? b + 1 : nullptr;
    k_full = b + (Cfg::kPersistent ? 2 : 1);
    k_empty = k_full + Cfg::S;
    v_full = k_empty + Cfg::S;
    v_empty = v_full + Cfg::kVStages;
    item_ring = reinterpret_cast<std::int32_t*>(b + Cfg::kBarriers);
  }
  /// One thread: full barriers wait for one arrival (the producer's, with its transaction bytes), the stages' empty
  /// barriers for every consumer warp, q_empty for every consumer thread (consumer.cuh, release_q).
  __device__ __forceinline__ void init() const {
    ptx::mbarrier_init(q_full, 1);
    if constexpr (Cfg::kPersistent) ptx::mbarrier_init(q_empty, Cfg::kConsumers * 128);
    for (int s = 0; s < Cfg::S; ++s) {
      ptx::mbarrier_init(k_full + s, 1);
      ptx::mbarrier_init(k_empty + s, Cfg::kConsumerWarps);
    }
    for (int s = 0; s < Cfg::kVStages; ++s) {
      ptx::mbarrier_init(v_full + s, 1);
      ptx::mbarrier_init(v_empty + s, Cfg::kConsumerWarps);
    }
    ptx::fence_barrier_init();
  }
};

/// How far a role has walked the Q buffer and the K and V rings. A persistent CTA's roles keep one each across work
/// items: they walk the same sequence (every item uses the Q buffer once, then one K and one V stage per entry), so
/// they agree on every stage and phase, which follow from two counts (counts rather than the rings' PipelineStates,
/// so that little stays live across a mainloop). A CTA of one item keeps it at zero (constants after inlining).
template <int S>
struct RingPositions {
  std::int32_t items = 0;    // items done (persistent CTAs: empty ones included)
  std::int32_t entries = 0;  // entries (KV tiles) done
  /// The position of the next entry in a ring of St stages (the K ring: S; the V ring: Config::kVStages).
  template <int St = S>
  __device__ __forceinline__ PipelineState<St> ring() const {
    return {entries % St, static_cast<std::uint32_t>(entries / St) & 1u};
  }
  /// The parity of the Q buffer's next use, and the item ring's slot of the next item.
  __device__ __forceinline__ std::uint32_t q_phase() const { return static_cast<std::uint32_t>(items) & 1u; }
  /// Steps past an item of n entries (n <= 0: an empty item).
  __device__ __forceinline__ void advance(int n) { ++items, entries += n > 0 ? n : 0; }
};

/// Producer side: waits until stage st of a ring is free (the consumers released its previous use; a fresh
/// barrier counts as released), then arms its full barrier with the stage's transaction bytes.
__device__ __forceinline__ void producer_acquire(std::uint64_t* empty, std::uint64_t* full, int stage,
                                                 std::uint32_t phase, std::uint32_t bytes) {
  ptx::mbarrier_wait(empty + stage, phase ^ 1u);
  ptx::mbarrier_arrive_expect_tx(full + stage, bytes);
}

/// Consumer side: waits until stage st has landed.
__device__ __forceinline__ void consumer_wait(std::uint64_t* full, int stage, std::uint32_t phase) {
  ptx::mbarrier_wait(full + stage, phase);
}

/// Consumer side, every thread of a consumer warp after its wgmma reads of the stage retired (the warp's
/// wgmma_wait): lane 0 releases (predicated, no branch).
__device__ __forceinline__ void consumer_release(std::uint64_t* empty, int stage) {
  ptx::mbarrier_arrive_if(empty + stage, (threadIdx.x & 31) == 0);
}

}  // namespace tessera::kernels::wgmma
