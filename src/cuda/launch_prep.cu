// GPU launch preparation: sizing from the plan and mu(M), the builder sequence, download for tests and tools.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "core/query_tiles.hpp"
#include "cuda/check.cuh"
#include "cuda/launch_prep_gpu.hpp"
#include "cuda/launch_prep_kernels.cuh"
#include "tessera/error.hpp"

namespace tessera {

namespace {

cudaStream_t cu(Stream s) { return reinterpret_cast<cudaStream_t>(s); }

void grow(DeviceBuffer& b, std::int64_t bytes) { b.reserve(static_cast<std::size_t>(std::max<std::int64_t>(bytes, 16))); }

template <class T>
void download(std::vector<T>& dst, const void* src, std::int64_t n, cudaStream_t s) {
  dst.resize(static_cast<std::size_t>(n));
  if (n > 0) TESSERA_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src, sizeof(T) * n, cudaMemcpyDeviceToHost, s));
}

// Bytes of a membership array of `entries` words of member_bytes(p) bytes, in whole 8-byte words: the two-pass
// builder ORs 1- and 2-byte words through the aligned 32-bit word that holds them (member_word.cuh).
std::int64_t member_array_bytes(const prep::PrepParams& p, std::int64_t entries) {
  return (entries * prep::member_bytes(p) + 7) / 8 * 8;
}

// Host copy of a device membership array: n words of `bytes` bytes, widened to the host's 8-byte words.
void download_member(std::vector<std::uint64_t>& dst, const void* src, std::int64_t n, std::int32_t bytes,
                     cudaStream_t s) {
  std::vector<std::uint8_t> raw;
  download(raw, src, n * bytes, s);
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(s));
  dst.resize(static_cast<std::size_t>(n));
  for (std::int64_t e = 0; e < n; ++e) {  // little-endian, as the device
    std::uint64_t w = 0;
    std::memcpy(&w, raw.data() + e * bytes, static_cast<std::size_t>(bytes));
    dst[e] = w;
  }
}

// Direct KV on logical rows in ascending order: the tile rows are mu(M)'s CSR (zero copy).
bool is_zero_copy(const prep::PrepParams& p) { return prep::tile_offsets_are_mask_offsets(p) && p.traversal == 0; }

// Whether the kernels compute the work items themselves (TileMetadataView::implicit_items): asked for, and the plan is
// unsplit, not persistent, one item per CTA.
bool uses_implicit_items(const Plan& plan, bool implicit_items) {
  return implicit_items && plan.org.split == 1 && !plan.org.persistent && plan.org.group == 1;
}

}  // namespace

TileMetadataView DeviceTileMetadata::view() const noexcept {
  TileMetadataView v;
  v.items = implicit_items ? nullptr : items.as<const WorkItem>();
  v.n_items = n_items;
  v.implicit_items = implicit_items ? 1 : 0;
  v.query_geometry = params.query_geometry();
  v.kv_tile = kv_tile_ptr;
  v.member = params.membership ? member.data() : nullptr;
  v.member_bytes = prep::member_bytes(params);
  v.gather_blocks = params.pack ? gather_blocks.as<const std::int32_t>() : nullptr;
  v.c_kv_gather = params.pack;
  v.n_entries = n_entries;
  v.merge_offsets = merge_offsets.as<const std::int32_t>();
  v.merge_targets = merge_targets.as<const WorkItem>();
  v.n_merge = n_merge;
  v.n_partials = n_partials;
  v.tile_q = params.tile_q;
  v.tile_kv = params.tile_kv;
  v.sub_q = sub_q;
  v.sub_kv = sub_kv;
  v.block_kv = block_kv;
  v.items_per_cta = items_per_cta;
  v.persistent = persistent;
  v.item_counter = persistent ? item_counter.as<std::uint32_t>() : nullptr;
  v.tile_row_offsets = row_offsets_ptr;
  v.tile_row_ends = row_aligned ? tile_row_ends.as<const std::int32_t>() : nullptr;
  v.n_tile_rows = static_cast<std::int32_t>(params.tile_rows());
  return v;
}

void enqueue_prepare_plan_gpu(const Plan& plan, const DeviceMaskState& mask, const PrepProblem& problem,
                              Stream stream, DeviceTileMetadata& out, bool implicit_items, const MaskStateGate* gate) {
  prep::PrepParams p = make_prep_params(plan, mask.shape, problem);
  if (gate && plan.org.persistent)  // its sort and gather kernels are not gated
    throw Error(ErrorCode::kInternal, "plan", "speculative preparation of a persistent plan");
  if (gate) {
    p.gate_active = gate->active;
    p.gate_error = gate->error;
    p.gate_capacity = gate->capacity;
  }
  // Buffers are sized for the active blocks mu(M)'s own buffer holds (at least mask.nnz; a speculative preparation,
  // which does not know mask.nnz yet, for gate->capacity, the same number), so a speculation never has to grow them.
  const std::int64_t capacity = static_cast<std::int64_t>(mask.col_indices.bytes() / 4);
  const std::int64_t sized_nnz = gate ? gate->capacity : std::max(mask.nnz, capacity);
  const cudaStream_t s = cu(stream);
  out.params = p;
  out.sub_q = plan.q.kind == MappingKind::kCoarsen ? plan.block_q : plan.tile_q();
  out.sub_kv = plan.kv.kind == MappingKind::kCoarsen ? plan.block_kv : plan.tile_kv();
  out.block_kv = plan.block_kv;
  out.items_per_cta = plan.org.group;
  out.persistent = plan.org.persistent ? 1 : 0;
  const PrepBounds bd = prep_bounds(plan, p, sized_nnz, problem.head_dim);
  out.bounds = bd;
  const auto* mask_rows = mask.row_offsets.as<const std::int32_t>();
  const auto* mask_cols = mask.col_indices.as<const std::int32_t>();
  const bool zero_copy = is_zero_copy(p);
  out.mask_nnz = gate ? gate->capacity : mask.nnz;
  out.speculative = gate != nullptr;
  out.implicit_items = uses_implicit_items(plan, implicit_items);

  grow(out.items, bd.items * static_cast<std::int64_t>(sizeof(WorkItem)));
  grow(out.merge_offsets, (bd.merges + 1) * 4);
  grow(out.merge_targets, bd.merges * static_cast<std::int64_t>(sizeof(WorkItem)));
  grow(out.totals, 4 * 4);
  if (plan.org.persistent) {
    grow(out.keys, bd.items * 4);
    grow(out.keys_alt, bd.items * 4);
    grow(out.order, bd.items * 4);
    grow(out.order_alt, bd.items * 4);
    grow(out.items_alt, bd.items * static_cast<std::int64_t>(sizeof(WorkItem)));
    grow(out.item_counter, 4);  // the launcher clears it before each persistent launch (scheduler.cuh)
  }
  std::size_t cub_bytes = prep::work_items_cub_temp_bytes(plan.org.persistent ? bd.items : 0);
  if (!zero_copy && !prep::tile_rows_single_pass_fits(p))  // the two-pass builder scans the row counts
    cub_bytes = std::max(cub_bytes, prep::tile_rows_cub_temp_bytes(bd.tile_rows));
  grow(out.cub_temp, static_cast<std::int64_t>(cub_bytes));
  std::int64_t lookback_words = prep::work_items_lookback_words(p);
  if (!zero_copy) lookback_words = std::max(lookback_words, prep::tile_rows_lookback_words(p));
  const std::size_t lookback_before = out.lookback.bytes();
  grow(out.lookback, lookback_words * 8);
  if (out.lookback.bytes() != lookback_before)
    TESSERA_CUDA_CHECK(cudaMemsetAsync(out.lookback.data(), 0, out.lookback.bytes(), s));

  out.row_aligned = !zero_copy && out.row_builder == prep::RowBuilder::kAuto && prep::row_aligned_gpu(p);
  if (out.row_aligned) grow(out.tile_row_ends, bd.tile_rows * 4);
  std::int32_t* const row_ends = out.row_aligned ? out.tile_row_ends.as<std::int32_t>() : nullptr;
  if (zero_copy) {
    out.row_offsets_ptr = mask_rows;
    out.kv_tile_ptr = mask_cols;
  } else {
    if (!prep::tile_offsets_are_mask_offsets(p)) grow(out.tile_row_offsets, (bd.tile_rows + 1) * 4);
    if (!p.pack) grow(out.kv_tile, bd.entries * 4);
    if (p.membership) grow(out.member, member_array_bytes(p, bd.entries));
    if (p.pack) grow(out.gather_blocks, bd.entries * p.pack * 4);
    if (p.traversal == 2 && prep::run_major_in_emission(p)) {  // run tables of rows whose columns are not staged
      grow(out.runs, sized_nnz * 4);
    } else if (p.traversal == 2) {  // run-major: ascending rows in scratch, then the reorder
      if (!p.pack) grow(out.tmp_kv, bd.entries * 4);
      if (p.membership) grow(out.tmp_member, member_array_bytes(p, bd.entries));
      if (p.pack) grow(out.tmp_gather, bd.entries * p.pack * 4);
      grow(out.runs, bd.entries * 4);
    }
    prep::TileRowBuffers tb{out.tile_row_offsets.as<std::int32_t>(), row_ends, out.kv_tile.as<std::int32_t>(),
                            out.member.data(), out.gather_blocks.as<std::int32_t>(),
                            out.tmp_kv.as<std::int32_t>(), out.tmp_member.data(),
                            out.tmp_gather.as<std::int32_t>(), out.runs.as<std::int32_t>(),
                            out.lookback.as<std::uint64_t>(), out.cub_temp.data(), out.cub_temp.bytes()};
    prep::build_tile_rows_gpu(p, mask_rows, mask_cols, tb, s, out.row_builder == prep::RowBuilder::kPersistent);
    out.row_offsets_ptr = prep::tile_offsets_are_mask_offsets(p) ? mask_rows
                                                                  : out.tile_row_offsets.as<const std::int32_t>();
    out.kv_tile_ptr = p.pack ? nullptr : out.kv_tile.as<const std::int32_t>();
  }
  if (out.rows_done_event)
    TESSERA_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(out.rows_done_event), s));
  if (out.implicit_items) return;  // the kernels compute the items (unsplit_item)
  prep::ItemBuffers ib{out.row_offsets_ptr, row_ends, out.items.as<WorkItem>(),
                       out.merge_offsets.as<std::int32_t>(), out.merge_targets.as<WorkItem>(),
                       out.lookback.as<std::uint64_t>(),
                       out.keys.as<std::uint32_t>(), out.keys_alt.as<std::uint32_t>(),
                       out.order.as<std::uint32_t>(), out.order_alt.as<std::uint32_t>(),
                       out.items_alt.as<WorkItem>(), out.cub_temp.data(),
                       out.cub_temp.bytes(), out.totals.as<std::int32_t>()};
  prep::build_work_items_gpu(p, ib, plan.org.persistent, bd.items, s);
}

bool prepare_plan_gpu_launches(const Plan& plan, bool implicit_items) {
  return !(is_zero_copy(plan_mapping_params(plan)) && uses_implicit_items(plan, implicit_items));
}

void settle_speculative_prepare(DeviceTileMetadata& out, const DeviceMaskState& mask) {
  if (!out.speculative || mask.nnz > out.mask_nnz)
    throw Error(ErrorCode::kInternal, "metadata", "no speculative preparation fits this mask");
  out.mask_nnz = mask.nnz;
  out.speculative = false;
  out.params.gate_active = out.params.gate_error = nullptr;  // they point into mu(M)'s scratch: not kept
  out.params.gate_capacity = 0;
}

void finish_prepare_plan_gpu(DeviceTileMetadata& out, Stream stream) {
  const cudaStream_t s = cu(stream);
  if (out.speculative)
    throw Error(ErrorCode::kInternal, "metadata", "speculative preparation not settled against mu(M)");
  const PrepBounds& bd = out.bounds;
  if (out.implicit_items) {  // unsplit: one item per query tile; only the entry count is on the device
    out.n_items = static_cast<std::int32_t>(out.params.q_tiles());
    out.n_partials = out.n_merge = 0;
    if (is_zero_copy(out.params)) {
      out.n_entries = out.mask_nnz;
    } else if (out.row_aligned) {  // the extent is known on the host: nothing to copy, no synchronization
      out.n_entries = out.mask_nnz * out.params.r_kv;
    } else {
      std::int32_t entries = 0;
      TESSERA_CUDA_CHECK(cudaMemcpyAsync(&entries, out.row_offsets_ptr + out.params.tile_rows(), sizeof(entries),
                                         cudaMemcpyDeviceToHost, s));
      TESSERA_CUDA_CHECK(cudaStreamSynchronize(s));
      out.n_entries = entries;
    }
  } else {
    std::int32_t totals[4];
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(totals, out.totals.data(), sizeof(totals), cudaMemcpyDeviceToHost, s));
    TESSERA_CUDA_CHECK(cudaStreamSynchronize(s));
    out.n_entries = totals[0];
    out.n_items = totals[1];
    out.n_partials = totals[2];
    out.n_merge = totals[3];
  }
  if (out.n_entries > bd.entries || out.n_items > bd.items)
    throw Error(ErrorCode::kInternal, "metadata", "launch preparation exceeded its size bounds");
}

void prepare_plan_gpu(const Plan& plan, const DeviceMaskState& mask, const PrepProblem& problem, Stream stream,
                      DeviceTileMetadata& out) {
  enqueue_prepare_plan_gpu(plan, mask, problem, stream, out);
  finish_prepare_plan_gpu(out, stream);
}

HostTileMetadata download_tile_metadata(const DeviceTileMetadata& md, Stream stream) {
  const cudaStream_t s = cu(stream);
  const prep::PrepParams& p = md.params;
  HostTileMetadata h;
  h.params = p;
  download(h.tile_row_offsets, md.row_offsets_ptr, p.tile_rows() + 1, s);
  std::vector<std::int32_t> ends;
  if (md.row_aligned) download(ends, md.tile_row_ends.data(), p.tile_rows(), s);
  if (!p.pack) download(h.kv_tile, md.kv_tile_ptr, md.n_entries, s);
  if (p.membership) download_member(h.member, md.member.data(), md.n_entries, prep::member_bytes(p), s);
  if (p.pack) download(h.gather_blocks, md.gather_blocks.data(), md.n_entries * p.pack, s);
  if (md.implicit_items) {  // what the kernels compute: unsplit items from the tile-row offsets (below)
    h.merge_offsets = {0};
  } else {
    download(h.items, md.items.data(), md.n_items, s);
    download(h.merge_offsets, md.merge_offsets.data(), md.n_merge + 1, s);
    download(h.merge_targets, md.merge_targets.data(), md.n_merge, s);
  }
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(s));
  if (md.row_aligned) compact_row_aligned(h, ends);  // the CPU twins' compact CSR (items shifted with their rows)
  if (md.implicit_items) {
    h.items.resize(static_cast<std::size_t>(md.n_items));
    const QueryTileGeometry g = p.query_geometry();
    for (std::int32_t q = 0; q < md.n_items; ++q) h.items[q] = unsplit_item(g, h.tile_row_offsets.data(), nullptr, q);
  }
  h.n_partials = md.n_partials;
  h.sub_q = md.sub_q;
  h.sub_kv = md.sub_kv;
  h.block_kv = md.block_kv;
  h.items_per_cta = md.items_per_cta;
  h.persistent = md.persistent;
  return h;
}

DeviceMaskState upload_mask_state(const HostMaskState& mask, Stream stream) {
  const cudaStream_t s = cu(stream);
  DeviceMaskState d;
  d.shape = mask.shape;
  d.nnz = static_cast<std::int64_t>(mask.col_indices.size());
  d.stats = mask.stats;
  d.row_offsets = DeviceBuffer(mask.row_offsets.size() * 4);
  d.col_indices = DeviceBuffer(std::max<std::size_t>(mask.col_indices.size(), 1) * 4);
  TESSERA_CUDA_CHECK(cudaMemcpyAsync(d.row_offsets.data(), mask.row_offsets.data(), mask.row_offsets.size() * 4,
                                     cudaMemcpyHostToDevice, s));
  if (!mask.col_indices.empty())
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(d.col_indices.data(), mask.col_indices.data(), mask.col_indices.size() * 4,
                                       cudaMemcpyHostToDevice, s));
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(s));
  return d;
}

}  // namespace tessera
