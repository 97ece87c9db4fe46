#pragma once
// Work items of a CTA. One CTA per item (plans without persistent CTAs): item blockIdx.x. Persistent CTAs (plans
// `g1p` on entries with Config::kPersistent): CTA c runs item c first, then each next item is a ticket of the
// launch's global counter (TileMetadataView::item_counter[0]) plus gridDim.x, so a CTA that finishes early takes
// the next item of the list (the plan's longest-first order): the hardware's own order of CTAs, kept by a fixed
// number of CTAs. Fixed striding (CTA c: items c, c + G, ...) lost up to 13 % to one CTA per item on the H200
// (session 14: uneven rows pile up on some CTAs); a counter keeps the balance of the hardware's order.
// The launcher clears the counter on the launch's stream before each persistent launch (an 8-byte memset: whatever
// an earlier launch left, e.g. one that overlapped another on the same counter, cannot carry over). Every item run
// is followed by one ticket, so a launch leaves the counter at exactly n_items (the tests check it). Launches that
// share a counter must not overlap (one Runtime's calls are ordered by the caller, runtime.hpp).
//
// The producer thread takes the tickets and announces each item to the consumers in the item ring
// (Barriers::item_ring, two int32 slots by item parity) before its arrival on the Q buffer's full barrier (release;
// the consumers' wait acquires). Slot i & 1 is written again only for item i + 2, after every consumer thread released
// the Q buffer of item i + 1, i.e. after it has finished item i, epilogue included. An index >= n_items ends the CTA.
#include <cstdint>

#include "kernels/launch.hpp"
#include "kernels/work_item.cuh"

namespace tessera::kernels::wgmma {

/// The next item of a persistent CTA (producer thread): gridDim.x + a ticket (>= n_items: the CTA is done).
__device__ __forceinline__ std::int32_t take_ticket(std::uint32_t* counter) {
  return static_cast<std::int32_t>(gridDim.x + atomicAdd(counter, 1u));
}

/// The item a consumer computes, read where it is needed (at the start and again in the epilogue).
/// One CTA per item: the item itself, kept. Persistent: its slot of the item ring (read through a volatile pointer,
/// so that no register holds the item across the mainloop; ptxas spilled it there in session 14).
template <bool kPersist>
struct ItemRef;

template <>
struct ItemRef<false> {
  WorkItem it;
  __device__ __forceinline__ WorkItem get(const AttentionParams&) const { return it; }
};

template <>
struct ItemRef<true> {
  const volatile std::int32_t* slot;
  __device__ __forceinline__ WorkItem get(const AttentionParams& p) const { return work_item(p, *slot); }
};

}  // namespace tessera::kernels::wgmma
