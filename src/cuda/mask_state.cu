// build_mask_state_gpu(): mu(M) on the GPU (DESIGN.md section 5); the CPU twin is src/core/mask_state_cpu.cpp.
// Sequence on the stream: zero the counters; pass 1 (validate, count per row, counters; block-CSR: also the copy);
// exclusive scan of the row counts into row_offsets (CUB); pass 2 (col_indices), launched speculatively: it writes
// only when the counters show no error and the active blocks fit in out.col_indices' capacity; the coarsened pair
// counts over the canonical CSR (mask_state_coarsen.cu: selection features, so before the counters are read); copy
// the counters and the first-error word to pinned host memory (event). When the speculation fell short (or is
// off), the host grows the buffer, launches pass 2 again and counts the coarsened pairs again, waiting once more.
// With MaskStateWorkspace::Impl::count_coarsened off (the request's plan-table tree never splits on them), the
// pairs are not counted (MaskCounters::coarsened_pairs = -1) and the counters are copied right after the scan, so
// pass 2 runs while the host selects and prepares.
// Errors: the device records the smallest (kind, position) key; the host then replays the CPU content check on a
// host copy of the mask's index arrays, so both paths raise the same Error with the same wording.
#include <algorithm>
#include <chrono>
#include <cub/device/device_scan.cuh>
#include <string>
#include <vector>

#include "core/mask_checks.hpp"
#include "cuda/check.cuh"
#include "cuda/mask_state_common.cuh"
#include "cuda/mask_state_launch.hpp"
#include "cuda/mask_state_speculation.hpp"
#include "cuda/mask_state_workspace.hpp"
#include "tessera/mask_state_gpu.hpp"

namespace tessera {

MaskStateWorkspace::MaskStateWorkspace() : impl_(std::make_unique<Impl>()) {}
MaskStateWorkspace::~MaskStateWorkspace() = default;
MaskStateWorkspace::MaskStateWorkspace(MaskStateWorkspace&&) noexcept = default;
MaskStateWorkspace& MaskStateWorkspace::operator=(MaskStateWorkspace&&) noexcept = default;

namespace {

using detail::DeviceCounters;

constexpr std::size_t kAlign = 256;
std::size_t align_up(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

/// Copies a mask's int32 index arrays to the host and runs the CPU content check there; it throws the same Error
/// the CPU builder would. Reaching the end means the device flagged an error the host check does not see (a bug).
[[noreturn]] void replay_content_error(const BlockMask& mask, unsigned long long key, cudaStream_t s) {
  BlockMask h = mask;
  std::vector<std::int32_t> a, b;
  auto fetch = [&](const TensorView& t, std::vector<std::int32_t>& v, TensorView& ht) {
    v.assign(static_cast<std::size_t>(std::max<std::int64_t>(t.numel(), 1)), 0);
    if (t.numel() > 0) {
      TESSERA_CUDA_CHECK(
          cudaMemcpyAsync(v.data(), t.data, static_cast<std::size_t>(t.numel()) * 4, cudaMemcpyDeviceToHost, s));
    }
    ht.data = v.data();
    ht.device = Device::kCpu;
  };
  if (mask.format == MaskFormat::kBlockCsr) {
    fetch(mask.row_offsets, a, h.row_offsets);
    fetch(mask.col_indices, b, h.col_indices);
  } else {
    fetch(mask.counts, a, h.counts);
    fetch(mask.indices, b, h.indices);
  }
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(s));
  detail::check_mask_contents_host(h);
  throw Error(ErrorCode::kInternal, "mask",
              "the device check flagged error kind " + std::to_string(key >> 60) + " at position " +
                  std::to_string(key & ((1ull << 60) - 1)) + ", the host check found none");
}

}  // namespace

void build_mask_state_gpu(const BlockMask& mask, Stream stream, MaskStateWorkspace& workspace, DeviceMaskState& out) {
  build_mask_state_gpu(mask, stream, workspace, out, {});
}

void build_mask_state_gpu(const BlockMask& mask, Stream stream, MaskStateWorkspace& workspace, DeviceMaskState& out,
                          const std::function<void(const MaskStateGate&)>& before_wait) {
  if (detail::check_mask_structure(mask) != Device::kCuda) {
    throw Error(ErrorCode::kInvalidArgument, "mask", "build_mask_state_gpu() needs a mask in GPU memory (got cpu)");
  }
  MaskStateWorkspace::Impl& w = workspace.impl();
  using Stage = MaskStateWorkspace::Impl::Stage;
  w.ensure_device();
  cudaStream_t s = stream;
  const std::int64_t rows = mask.rows();
  out.shape = detail::mask_shape(mask);
  out.nnz = 0;
  out.row_offsets.reserve(static_cast<std::size_t>(rows + 1) * 4);
  auto* row_offsets = out.row_offsets.as<std::int32_t>();

  // Launch shape: warps per row-block and grid (grid-stride over rows).
  int warps = 8, smem = 0;
  if (mask.format == MaskFormat::kIndexLists) {
    detail::list_launch_shape(mask.n_kvb, w.max_smem_optin, warps, smem);
    if (warps == 0) {
      throw Error(ErrorCode::kUnsupported, "mask.indices",
                  "n_kvb = " + std::to_string(mask.n_kvb) + " needs a " + std::to_string((mask.n_kvb + 31) / 32 * 4) +
                      "-byte row bitmap, more than the " + std::to_string(w.max_smem_optin) +
                      " bytes of shared memory per block");
    }
  }
  const int grid = static_cast<int>(std::clamp<std::int64_t>((rows + warps - 1) / warps, 1, std::int64_t{w.sms} * 8));

  // Scratch: counters | row counts [rows + 1] | dense bitmap | CUB temporary storage.
  const std::size_t counts_bytes = align_up(static_cast<std::size_t>(rows + 1) * 4);
  const std::size_t bitmap_bytes =
      mask.format == MaskFormat::kDense
          ? align_up(static_cast<std::size_t>(rows * detail::dense_words_per_row(mask.n_kvb)) * 4)
          : 0;
  std::size_t scan_bytes = 0;
  if (mask.format != MaskFormat::kBlockCsr) {
    TESSERA_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<const std::int32_t*>(nullptr),
                                                     static_cast<std::int32_t*>(nullptr), static_cast<int>(rows + 1),
                                                     s));
  }
  w.scratch.reserve(align_up(sizeof(DeviceCounters)) + counts_bytes + bitmap_bytes + align_up(scan_bytes));
  auto* base = w.scratch.as<unsigned char>();
  auto* counters = reinterpret_cast<DeviceCounters*>(base);
  auto* row_count = reinterpret_cast<std::int32_t*>(base + align_up(sizeof(DeviceCounters)));
  auto* bitmap = reinterpret_cast<std::uint32_t*>(reinterpret_cast<unsigned char*>(row_count) + counts_bytes);
  void* scan_tmp = reinterpret_cast<unsigned char*>(bitmap) + bitmap_bytes;

  w.mark(Stage::kStart, s);
  TESSERA_CUDA_CHECK(cudaMemsetAsync(counters, 0, sizeof(DeviceCounters), s));
  detail::DenseMaskArgs dense{};
  detail::ListMaskArgs lists{};
  detail::CsrMaskArgs csr{};
  switch (mask.format) {
    case MaskFormat::kDense: {
      std::int64_t span = 1;
      for (int d = 0; d < 4; ++d) span += (mask.dense.shape[d] - 1) * mask.dense.stride[d];
      dense = {static_cast<const unsigned char*>(mask.dense.data),
               {mask.dense.stride[0], mask.dense.stride[1], mask.dense.stride[2], mask.dense.stride[3]},
               mask.heads,
               mask.n_qb,
               mask.n_kvb,
               rows,
               span};
      detail::launch_dense_count(dense, bitmap, row_count, counters, grid, s);
      break;
    }
    case MaskFormat::kIndexLists:
      lists = {static_cast<const std::int32_t*>(mask.counts.data), static_cast<const std::int32_t*>(mask.indices.data),
               detail::mask_k_max(mask), mask.n_kvb, rows};
      detail::launch_list_count(lists, row_count, counters, grid, warps, smem, s);
      break;
    case MaskFormat::kBlockCsr:
      csr = {static_cast<const std::int32_t*>(mask.row_offsets.data),
             static_cast<const std::int32_t*>(mask.col_indices.data), mask.col_indices.shape[0], mask.n_kvb, rows};
      // The copy is fused into the check: col_indices is sized from the input's nnz, known before any launch.
      out.col_indices.reserve(static_cast<std::size_t>(csr.nnz) * 4);
      detail::launch_csr_check(csr, counters, row_offsets, out.col_indices.as<std::int32_t>(), grid, s);
      break;
  }
  w.mark(Stage::kPass1, s);
  if (mask.format != MaskFormat::kBlockCsr) {
    TESSERA_CUDA_CHECK(
        cub::DeviceScan::ExclusiveSum(scan_tmp, scan_bytes, row_count, row_offsets, static_cast<int>(rows + 1), s));
  }
  w.mark(Stage::kScan, s);
  // Without the coarsened pairs, the counters go to the host before pass 2, which then runs while the host selects.
  const bool coarsen = w.count_coarsened;
  auto copy_counters = [&] {
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(w.host_counters, counters, sizeof(DeviceCounters), cudaMemcpyDeviceToHost, s));
    TESSERA_CUDA_CHECK(cudaEventRecord(w.counters_ready, s));
    w.mark(Stage::kCounters, s);
  };
  if (!coarsen) copy_counters();

  auto launch_pass2 = [&](const DeviceCounters* guard, long long capacity) {
    auto* col_indices = out.col_indices.as<std::int32_t>();
    if (mask.format == MaskFormat::kDense) {
      detail::launch_dense_emit(dense, bitmap, row_offsets, col_indices, guard, capacity, grid, s);
    } else {
      detail::launch_list_emit(lists, row_offsets, col_indices, guard, capacity, grid, warps, smem, s);
    }
    w.mark(Stage::kPass2, s);
  };
  // Speculative pass 2: its capacity is what out.col_indices holds now (capped so that the int32 offsets of a
  // mask that passes the device guard are exact).
  long long speculated = -1;
  if (mask.format != MaskFormat::kBlockCsr && w.speculative_pass2) {
    speculated = std::min<long long>(static_cast<long long>(out.col_indices.bytes() / 4), detail::kMaxMaskActiveBlocks);
    launch_pass2(counters, speculated);
  }
  if (mask.format == MaskFormat::kBlockCsr) w.mark(Stage::kPass2, s);  // no pass 2: the copy was fused into pass 1
  // Coarsened pairs over the CSR that is (or, speculatively, will be) mu(M)'s: counted again below if not.
  auto coarsen_args = [&](long long readable) {
    return detail::CoarsenArgs{row_offsets, out.col_indices.as<std::int32_t>(), readable, rows, out.shape.n_qb,
                               out.shape.n_kvb};
  };
  const long long coarsened_over = mask.format == MaskFormat::kBlockCsr ? csr.nnz : speculated;
  if (coarsen && coarsened_over >= 0)
    detail::launch_coarsen(coarsen_args(coarsened_over), counters, w.sms, w.max_smem_optin, w.coarsen_by_merge, s);
  if (coarsen) copy_counters();
  if (before_wait && (mask.format == MaskFormat::kBlockCsr || speculated >= 0)) {
    // Block-CSR: pass 1 copied col_indices (sized from the input's nnz) when the mask is valid.
    const std::int64_t capacity = mask.format == MaskFormat::kBlockCsr ? csr.nnz : speculated;
    before_wait(MaskStateGate{&counters->active, &counters->error_inv, capacity});
  }
  const auto wait_start = std::chrono::steady_clock::now();
  TESSERA_CUDA_CHECK(cudaEventSynchronize(w.counters_ready));
  w.last_wait_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - wait_start).count();
  const DeviceCounters hc = *w.host_counters;

  if (hc.error_inv != 0) replay_content_error(mask, ~hc.error_inv, s);
  if (hc.active > static_cast<unsigned long long>(detail::kMaxMaskActiveBlocks)) {
    throw Error(ErrorCode::kUnsupported, mask.format == MaskFormat::kDense ? "mask.dense" : "mask.counts",
                std::to_string(hc.active) + " active blocks, more than 2^31 - 1 (block-CSR offsets are int32)");
  }
  MaskCounters c;
  c.active_blocks = static_cast<std::int64_t>(hc.active);
  c.runs = static_cast<std::int64_t>(hc.runs);
  c.blocks_in_long_runs = static_cast<std::int64_t>(hc.long_blocks);
  c.max_row_active = static_cast<std::int64_t>(hc.max_row);
  c.empty_rows = static_cast<std::int64_t>(hc.empty_rows);
  for (int i = 0; i < 3; ++i) c.coarsened_pairs[i] = coarsen ? static_cast<std::int64_t>(hc.coarsened[i]) : -1;
  out.nnz = c.active_blocks;

  // Pass 2 again (unguarded) when it was not launched or the capacity it was given was short. A grown buffer gets
  // an eighth of headroom, so that masks of slightly more active blocks still take the speculative path.
  if (mask.format != MaskFormat::kBlockCsr && out.nnz > speculated) {
    const auto need = static_cast<std::size_t>(out.nnz) * 4;
    if (need > out.col_indices.bytes()) out.col_indices.reserve(need + need / 8);
    launch_pass2(nullptr, 0);
  }
  if (coarsen && mask.format != MaskFormat::kBlockCsr && out.nnz > speculated) {
    // The counts above came from a pass 2 that wrote nothing (or from no pass 2): count the pairs again.
    TESSERA_CUDA_CHECK(cudaMemsetAsync(counters->coarsened, 0, sizeof(counters->coarsened), s));
    detail::launch_coarsen(coarsen_args(out.nnz), counters, w.sms, w.max_smem_optin, w.coarsen_by_merge, s);
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(w.host_counters->coarsened, counters->coarsened, sizeof(counters->coarsened),
                                       cudaMemcpyDeviceToHost, s));
    const auto again = std::chrono::steady_clock::now();
    TESSERA_CUDA_CHECK(cudaStreamSynchronize(s));
    w.last_wait_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - again).count();
    for (int i = 0; i < 3; ++i) c.coarsened_pairs[i] = static_cast<std::int64_t>(w.host_counters->coarsened[i]);
  }
  out.stats = derive_mask_stats(out.shape, c);
}

double last_wait_us(MaskStateWorkspace& workspace) { return workspace.impl().last_wait_us; }

DeviceMaskState build_mask_state_gpu(const BlockMask& mask, Stream stream) {
  MaskStateWorkspace workspace;
  DeviceMaskState out;
  build_mask_state_gpu(mask, stream, workspace, out);
  // The workspace (dense bitmap) is freed on return: let pass 2 finish first.
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream));
  return out;
}

HostMaskState download_mask_state(const DeviceMaskState& state, Stream stream) {
  HostMaskState h;
  h.shape = state.shape;
  h.stats = state.stats;
  h.row_offsets.assign(static_cast<std::size_t>(state.shape.rows() + 1), 0);
  h.col_indices.assign(static_cast<std::size_t>(state.nnz), 0);
  TESSERA_CUDA_CHECK(cudaMemcpyAsync(h.row_offsets.data(), state.row_offsets.data(), h.row_offsets.size() * 4,
                                     cudaMemcpyDeviceToHost, stream));
  if (state.nnz > 0) {
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(h.col_indices.data(), state.col_indices.data(), h.col_indices.size() * 4,
                                       cudaMemcpyDeviceToHost, stream));
  }
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream));
  return h;
}

}  // namespace tessera
