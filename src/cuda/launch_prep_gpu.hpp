#pragma once
// Launch preparation on the GPU (DESIGN.md section 5): derives the selected plan's launch metadata from mu(M) in
// device memory. The builders follow core/launch_prep_rules.hpp and match the CPU twins
// (core/launch_prep.hpp) bit for bit. No CUDA headers needed to include this file.
#include <cstdint>

#include "core/launch_prep.hpp"
#include "core/row_builder_choice.hpp"
#include "tessera/cuda_types.hpp"
#include "cuda/mask_state_speculation.hpp"
#include "tessera/mask_state_gpu.hpp"

namespace tessera {

/// Prepared launch metadata in device memory. Buffers are sized from prep_bounds() (plan + mask state) and kept
/// across calls (reserve only grows), so preparing again into the same object allocates nothing new.
struct DeviceTileMetadata {
  prep::PrepParams params;
  // Metadata arrays (see TileMetadataView). For a plan that needs no tile-row building (c_q == 1, Direct KV,
  // ascending traversal) tile_row_offsets / kv_tile point into the mask state itself: zero copy.
  // tile_row_ends: the rows' ends in the row-aligned layout (TileMetadataView::tile_row_ends), written when
  // `row_aligned`.
  DeviceBuffer tile_row_offsets, tile_row_ends, kv_tile, member, gather_blocks, items, merge_offsets, merge_targets;
  // Scratch: run-major run tables (c_q == 1) or reorder copies and run starts (c_q > 1), persistent sort keys, CUB
  // temporary storage, totals.
  DeviceBuffer tmp_kv, tmp_member, tmp_gather, keys, keys_alt, order, order_alt, items_alt, cub_temp, totals, runs;
  // Decoupled look-back state of the single-pass builders (statuses + counters): zeroed when allocated, and every
  // builder launch leaves it zero again.
  DeviceBuffer lookback;
  // Persistent CTAs' ticket counter (TileMetadataView::item_counter): allocated by the first persistent
  // preparation; the kernel launcher clears it before each persistent launch.
  DeviceBuffer item_counter;
  const std::int32_t* row_offsets_ptr = nullptr;  ///< tile_row_offsets actually used (own buffer or the mask's)
  const std::int32_t* kv_tile_ptr = nullptr;      ///< kv_tile actually used (own buffer, the mask's, or null)
  /// Whether the tile rows are row-aligned (tile_row_ends written; set by enqueue_prepare_plan_gpu from
  /// row_builder and the plan): row t's entries start at r_kv times mu(M)'s offset of its first logical row.
  bool row_aligned = false;
  /// Entries: the compact CSR's total, or the row-aligned arrays' extent (r_kv * mask nnz; gaps included).
  std::int64_t n_entries = 0;
  std::int32_t n_items = 0, n_merge = 0, n_partials = 0;
  std::int32_t sub_q = 0, sub_kv = 0, block_kv = 0, items_per_cta = 1, persistent = 0;
  PrepBounds bounds;
  /// Implicit work items (TileMetadataView::implicit_items): the work-item builder did not run and `items` is not
  /// written; the kernel computes item q from the query-tile geometry. Set by enqueue_prepare_plan_gpu.
  bool implicit_items = false;
  std::int64_t mask_nnz = 0;  ///< active blocks of mu(M) (n_entries of a zero-copy plan); while `speculative`, the
                              ///< capacity the buffers were sized for
  /// Enqueued speculatively (before mu(M)'s counters were read, gated on the device); settle_speculative_prepare()
  /// confirms it against mu(M) before finish_prepare_plan_gpu() may run.
  bool speculative = false;
  /// Tile-row layout and builder for plans whose offsets are not mu(M)'s own (core/row_builder_choice.hpp): kAuto
  /// (default) writes the row-aligned layout where prep::prefer_row_aligned and the builder allow it, else compact;
  /// kStreaming / kPersistent force the compact layout from that kernel (tests, benchmarks; kPersistent: c_q == 1
  /// linear orders). Same tile rows either way: all match the CPU twins bit for bit after download. Read by
  /// enqueue_prepare_plan_gpu().
  prep::RowBuilder row_builder = prep::RowBuilder::kAuto;
  /// Benchmarks only: when set (a cudaEvent_t), enqueue_prepare_plan_gpu() records it on the stream between the
  /// tile-row builders and the work-item builders, so their GPU times can be told apart. Null: nothing recorded.
  void* rows_done_event = nullptr;

  /// Device pointers of the prepared metadata, for the kernels.
  TileMetadataView view() const noexcept;
};

/// Prepares `plan` for mu(M) on `stream` into `out` (reusing its buffers). Enqueues the builders, then copies four
/// totals (entries, items, partials, merges) to the host and synchronizes `stream` once.
/// Throws Error as make_prep_params(), and Error(kCudaError) on CUDA failures.
void prepare_plan_gpu(const Plan& plan, const DeviceMaskState& mask, const PrepProblem& problem, Stream stream,
                      DeviceTileMetadata& out);

/// The two halves of prepare_plan_gpu(): enqueue the builders on `stream` (no synchronization; the totals stay in
/// device memory, so this part is capturable in a CUDA graph), then copy the totals back and synchronize.
/// implicit_items: for an unsplit, non-persistent plan with one item per CTA (split 1, g1), skip the work-item
/// builder (one launch less) and let the kernels compute each item (TileMetadataView::implicit_items); the items
/// array is then not written, so download_tile_metadata() has no items. Other plans ignore it. The finish then
/// copies back only the entry count, and nothing at all for a zero-copy plan (no synchronization).
/// gate (speculative preparation, Runtime::run): enqueued from build_mask_state_gpu's before_wait hook, when mask.nnz is
/// not known yet: the buffers are sized for gate->capacity active blocks and every builder kernel returns at once
/// unless the device counters pass the gate (prep::PrepParams::gated_off), so a mask that turns out invalid or larger
/// writes nothing. Not for persistent plans (Error kInternal). After the wait, settle_speculative_prepare() when
/// mask.nnz <= gate->capacity; otherwise enqueue again without a gate.
void enqueue_prepare_plan_gpu(const Plan& plan, const DeviceMaskState& mask, const PrepProblem& problem,
                              Stream stream, DeviceTileMetadata& out, bool implicit_items = false,
                              const MaskStateGate* gate = nullptr);
/// Whether enqueue_prepare_plan_gpu(plan, ..., implicit_items) launches anything on the GPU (false: a zero-copy plan
/// with implicit items, whose preparation is host bookkeeping only).
bool prepare_plan_gpu_launches(const Plan& plan, bool implicit_items);

/// Confirms a speculative preparation against the built mu(M) (mask.nnz <= the gate's capacity, else
/// Error(kInternal)): records mask.nnz, so finish_prepare_plan_gpu() sees the preparation as a plain one.
void settle_speculative_prepare(DeviceTileMetadata& out, const DeviceMaskState& mask);
void finish_prepare_plan_gpu(DeviceTileMetadata& out, Stream stream);

/// Copies prepared device metadata into host memory (tests, tools). Synchronizes `stream`. A row-aligned layout is
/// compacted into the host's CSR (entries of each row moved to its compact offset, item and merge-target entry ranges
/// shifted with their row), so the result compares with the CPU twins directly; throws Error(kInternal,
/// "metadata.tile_row_ends") if a row's range is not inside its aligned span.
HostTileMetadata download_tile_metadata(const DeviceTileMetadata& md, Stream stream);

/// Uploads a host mu(M) to the device (tests, benchmarks, tools). Synchronizes `stream`.
DeviceMaskState upload_mask_state(const HostMaskState& mask, Stream stream);

}  // namespace tessera
