#pragma once
// Test/bench helper: uploads a HostPlan, fills AttentionParams and runs a catalog entry (+ merge).
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "cuda/check.cuh"
#include "kernel_plan_builder.hpp"
#include "kernels/launch.hpp"
#include "tessera/cuda_types.hpp"

namespace tessera::testing {

template <class T>
inline DeviceBuffer upload(const std::vector<T>& v) {
  DeviceBuffer d(std::max<std::size_t>(v.size() * sizeof(T), 16));
  if (!v.empty()) TESSERA_CUDA_CHECK(cudaMemcpy(d.data(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

/// Device copy of a HostPlan plus the split-KV workspace it needs, and the ticket counter of persistent CTAs.
struct DevicePlan {
  DeviceBuffer items, kv_tile, member, gather, merge_offsets, merge_targets, o_partial, lse_partial, item_counter;
  TileMetadataView view;
  int tile_q = 0;
  DevicePlan(const HostPlan& p, int tile_q_, int head_dim) : tile_q(tile_q_) {
    items = upload(p.items);
    kv_tile = upload(p.kv_tile);
    member = upload(p.member);
    gather = upload(p.gather);
    merge_offsets = upload(p.merge_offsets);
    merge_targets = upload(p.merge_targets);
    view.items = items.as<WorkItem>();
    view.n_items = static_cast<int>(p.items.size());
    view.kv_tile = p.kv_tile.empty() ? nullptr : kv_tile.as<std::int32_t>();
    view.member = p.member.empty() ? nullptr : member.data();
    view.member_bytes = p.member.empty() ? 0 : static_cast<int>(sizeof(std::uint64_t));  // host words, uploaded as is
    view.gather_blocks = p.gather.empty() ? nullptr : gather.as<std::int32_t>();
    view.c_kv_gather = p.c_kv;
    view.n_entries = static_cast<std::int64_t>(p.kv_tile.size());
    view.n_merge = static_cast<int>(p.merge_targets.size());
    view.merge_offsets = view.n_merge ? merge_offsets.as<std::int32_t>() : nullptr;
    view.merge_targets = view.n_merge ? merge_targets.as<WorkItem>() : nullptr;
    view.n_partials = p.n_partials;
    item_counter = DeviceBuffer(16);
    if (p.n_partials > 0) {
      o_partial = DeviceBuffer(std::size_t(p.n_partials) * tile_q * head_dim * sizeof(float));
      lse_partial = DeviceBuffer(std::size_t(p.n_partials) * tile_q * sizeof(float));
      poison_partials();
    }
  }
  /// Fills the split-KV partials with NaN, so that a partial the kernel never writes cannot pass for one a previous
  /// run left in the same memory (call before each run).
  void poison_partials() const {
    if (o_partial.bytes()) TESSERA_CUDA_CHECK(cudaMemset(o_partial.data(), 0xFF, o_partial.bytes()));
    if (lse_partial.bytes()) TESSERA_CUDA_CHECK(cudaMemset(lse_partial.data(), 0xFF, lse_partial.bytes()));
  }
  /// Runs the plan with persistent CTAs (on entries that have them; others run one CTA per item either way) or not.
  void set_persistent(bool on) {
    view.persistent = on ? 1 : 0;
    view.item_counter = on ? item_counter.as<std::uint32_t>() : nullptr;
  }
  /// Sets the ticket counter to garbage (the launcher must clear it before a persistent launch).
  void poison_counter() const { TESSERA_CUDA_CHECK(cudaMemset(item_counter.data(), 0xA5, 4)); }
  /// The ticket counter as the last launch left it (a persistent launch: n_items, one ticket per item run).
  std::uint32_t counter() const {
    std::uint32_t c = 0;
    TESSERA_CUDA_CHECK(cudaMemcpy(&c, item_counter.data(), 4, cudaMemcpyDeviceToHost));
    return c;
  }
  /// Points `prm` at this plan's metadata and workspace.
  void bind(kernels::AttentionParams& prm) const {
    prm.meta = view;
    prm.o_partial = view.n_partials ? o_partial.as<float>() : nullptr;
    prm.lse_partial = view.n_partials ? lse_partial.as<float>() : nullptr;
  }
};

/// Launches entry `name` (variant chosen from the plan form) and the merge when the plan splits.
inline void run_plan(const std::string& name, bool packed, bool membership, const DevicePlan& dp,
                     kernels::AttentionParams prm, Stream stream = nullptr) {
  dp.bind(prm);
  const auto v = packed ? kernels::KvVariant::kPacked
                        : (membership ? kernels::KvVariant::kSpanMasked : kernels::KvVariant::kSpan);
  kernels::launch_attention(name, v, prm, stream);
  if (dp.view.n_merge > 0) kernels::launch_merge(prm, dp.tile_q, stream);
}

}  // namespace tessera::testing
