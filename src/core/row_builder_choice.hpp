#pragma once
// Which GPU kernel builds the tile rows of a c_q == 1 plan whose tile-row offsets need a decoupled look-back
// (Coarsened, Refined or packed KV): the one-CTA-per-ticket streaming kernel (cuda/launch_prep_rows_stream.cu) or the
// persistent streaming kernel (cuda/launch_prep_rows_stream_persistent.cu). Both write the same metadata (the CPU
// twins define it); the choice is speed only. Host-only, testable without a GPU.
#include "core/launch_prep_rules.hpp"

namespace tessera::prep {

/// The tile-row builder of DeviceTileMetadata (cuda/launch_prep_gpu.hpp). Plans outside its scope (c_q > 1, Direct
/// KV with mu(M)'s offsets) ignore it.
enum class RowBuilder {
  kAuto,        ///< prefer_persistent_rows() decides (the default)
  kStreaming,   ///< one CTA per 30-row ticket, the look-back wait idles the CTA
  kPersistent,  ///< resident grid, the next ticket's counting overlaps the look-back
};

/// True when the persistent kernel is the faster choice for `p` (used by RowBuilder::kAuto). From the H200
/// measurement of bench_launch_prep (Wan2.1 720p Q64K64, 40 heads, 10 %; bench/results/h200_session6): persistent
/// faster by 4-6 us for Coarsened KV (c2/c4/c8), packed KV (p2/p4/p8) and Refined KV r2; slower for Refined KV r4
/// (116 against 68 us: four entries per block, store-bound), so Refined KV with r_kv > 2 (r3, r4, r6, r8) stays on
/// the streaming kernel. False for plans the persistent kernel does not build (c_q > 1, Direct KV, run-major
/// traversal: the streaming kernel writes run-major rows in their final order).
inline bool prefer_persistent_rows(const PrepParams& p) {
  return p.c_q == 1 && !tile_offsets_are_mask_offsets(p) && p.r_kv <= 2 && p.traversal != 2;
}

}  // namespace tessera::prep
