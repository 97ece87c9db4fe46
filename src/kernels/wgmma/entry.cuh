#pragma once
// Host launcher of one Wgmma catalog entry (included by the generated per-entry translation units): encodes the
// launch's TMA tensor maps, instantiates the entry's three kernel variants (each also persistent, on tiles with
// Config::kPersistent) and launches the one asked for.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "cuda/check.cuh"
#include "kernels/entry_common.cuh"
#include "kernels/launch.hpp"
#include "kernels/wgmma/attention.cuh"
#include "kernels/wgmma/tensor_map.hpp"

namespace tessera::kernels::wgmma {

/// The TMA view of operand q, k or v of `p`: `rows` tokens per box.
inline TensorMapSpec operand_spec(const AttentionParams& p, const void* base, bool query, std::int64_t sb,
                                  std::int64_t sn, std::int64_t sh, int rows) {
  TensorMapSpec s;
  s.base = base;
  s.dtype = p.dtype;
  s.batch = p.batch;
  s.tokens = query ? p.n_q : p.n_kv;
  s.heads = query ? p.h_q : p.h_kv;
  s.head_dim = p.head_dim;
  s.stride_b = sb, s.stride_n = sn, s.stride_h = sh;
  s.box_rows = rows;
  return s;
}

template <class Cfg, KvVariant V>
void launch_variant(const AttentionParams& p, Stream stream) {
  // Persistent CTAs (plans with persistent CTAs on tiles that have them): as many CTAs as are resident at once (or
  // p.max_ctas), each taking items (scheduler.cuh); otherwise one CTA per item.
  const bool persist = Cfg::kPersistent && p.meta.persistent != 0;
  auto* fn = persist ? &attention_kernel<Cfg, V, Cfg::kPersistent> : &attention_kernel<Cfg, V, false>;
  static std::atomic<std::uint64_t> opted_in[2]{};
  opt_in_smem_once(reinterpret_cast<const void*>(fn), int(Cfg::kSmemBytes), opted_in[persist], Cfg::kCarveoutPercent);
  if (p.meta.n_items == 0) return;
  KernelParams kp;
  kp.p = p;
  const int kv_rows = V == KvVariant::kPacked ? p.block_kv : Cfg::TKV;
  encode_tensor_map(kp.q, operand_spec(p, p.q, true, p.q_stride_b, p.q_stride_n, p.q_stride_h, Cfg::TQ), "q");
  encode_tensor_map(kp.k, operand_spec(p, p.k, false, p.k_stride_b, p.k_stride_n, p.k_stride_h, kv_rows), "k");
  encode_tensor_map(kp.v, operand_spec(p, p.v, false, p.v_stride_b, p.v_stride_n, p.v_stride_h, kv_rows), "v");
  int grid = p.meta.n_items;
  if (persist) {
    static std::atomic<int> resident[64]{};
    grid = std::min(grid, p.max_ctas > 0 ? p.max_ctas
                                         : resident_ctas_once(reinterpret_cast<const void*>(fn), Cfg::kThreads,
                                                              Cfg::kSmemBytes, resident));
    // The ticket counter starts at zero on this stream, whatever an earlier launch left (scheduler.cuh).
    TESSERA_CUDA_CHECK(
        cudaMemsetAsync(p.meta.item_counter, 0, sizeof(std::uint32_t), static_cast<cudaStream_t>(stream)));
  }
  fn<<<grid, Cfg::kThreads, Cfg::kSmemBytes, static_cast<cudaStream_t>(stream)>>>(kp);
  TESSERA_CUDA_CHECK_LAUNCH();
}

template <class Cfg>
void launch_entry(KvVariant v, const AttentionParams& p, Stream stream) {
  with_variant(v, [&](auto variant) { launch_variant<Cfg, decltype(variant)::value>(p, stream); });
}

}  // namespace tessera::kernels::wgmma
