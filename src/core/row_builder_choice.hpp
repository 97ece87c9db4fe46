#pragma once
// Which layout and GPU kernel build the tile rows of a plan whose tile-row offsets are not mu(M)'s own (Coarsened,
// Refined or packed KV, or Coarsened Q): the row-aligned layout (TileMetadataView::tile_row_ends: every row starts at
// a position fixed by mu(M)'s offsets, so no builder waits for a prefix over rows), or the compact CSR, whose offsets
// come from a decoupled look-back in the one-CTA-per-ticket streaming kernel (cuda/launch_prep_rows_stream.cu) or the
// persistent streaming kernel (cuda/launch_prep_rows_stream_persistent.cu). Every choice describes the same tile
// rows (the CPU twins define them; download_tile_metadata() compacts a row-aligned result); the choice is speed only.
// Host-only, testable without a GPU.
#include "core/launch_prep_rules.hpp"

namespace tessera::prep {

/// The tile-row builder of DeviceTileMetadata (cuda/launch_prep_gpu.hpp). Plans whose offsets are mu(M)'s own
/// (c_q == 1, Direct KV) ignore it.
enum class RowBuilder {
  kAuto,        ///< row-aligned where prefer_row_aligned() (and the GPU builder) allow it, else compact streaming
  kStreaming,   ///< compact: one CTA per 32-row ticket (c_q == 1), the look-back wait idles the CTA
  kPersistent,  ///< compact: resident grid, the next ticket's counting overlaps the look-back (c_q == 1)
};

/// True when RowBuilder::kAuto writes `p`'s tile rows row-aligned: offsets that are not mu(M)'s own, in ascending or
/// descending traversal (run-major rows are written in their final order by the compact streaming kernel; with
/// c_q > 1 they are reordered from compact scratch). The GPU side also needs a single-launch builder
/// (prep::row_aligned_gpu: c_q == 1, or the c_q > 1 bitmaps fit in shared memory). Why: no look-back and no wait
/// for one (bench/NOTES.md, "Launch preparation, eighth pass", has the H200 measurements).
inline bool prefer_row_aligned(const PrepParams& p) { return !tile_offsets_are_mask_offsets(p) && p.traversal != 2; }

}  // namespace tessera::prep
