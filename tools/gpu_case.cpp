#include "gpu_case.hpp"

#include <cuda_runtime.h>

#include <algorithm>

#include "cuda/check.cuh"
#include "tessera/mask_state_gpu.hpp"
#include "tessera/reference.hpp"
#include "tessera_corpus/packed_mask.hpp"

namespace tessera::tools {

GpuCase make_gpu_case(const corpus::Case& c, std::uint64_t seed, Stream stream) {
  GpuCase g;
  g.meta = c.meta;
  const std::int64_t H = c.mask.heads, N = c.meta.n_q, NK = c.meta.n_kv, D = 128;
  g.q = make_device_tensor(DType::kBFloat16, {1, N, H, D});
  g.k = make_device_tensor(DType::kBFloat16, {1, NK, H, D});
  g.v = make_device_tensor(DType::kBFloat16, {1, NK, H, D});
  g.o = make_device_tensor(DType::kBFloat16, {1, N, H, D});
  fill_random(g.q.view, seed * 3 + 1, stream);
  fill_random(g.k.view, seed * 3 + 2, stream);
  fill_random(g.v.view, seed * 3 + 3, stream);
  fill_nan(g.o.view, stream);
  const std::vector<std::uint8_t> dense = corpus::unpack(c.mask);
  g.mask = make_device_tensor(DType::kUInt8, {1, H, c.mask.n_qb, c.mask.n_kvb});
  upload_bytes(g.mask.view, dense.data(), dense.size(), stream);
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream));
  g.request.q = g.q.view;
  g.request.k = g.k.view;
  g.request.v = g.v.view;
  g.request.o = g.o.view;
  g.request.geometry = {c.meta.block_q, c.meta.block_kv};
  g.request.mask = BlockMask::from_dense(g.mask.view);
  g.active_pairs = static_cast<double>(c.mask.count()) * c.meta.block_q * c.meta.block_kv;
  return g;
}

double median_kernel_ms(Runtime& rt, GpuCase& g, const std::string& plan_id, int reps, Stream stream) {
  std::vector<double> t;
  RunOptions o;
  o.plan_id = plan_id;
  o.time_kernel = true;
  // Exact repeats after the first call: only the kernel is launched. A fresh version per call, because a new
  // case may reuse the previous case's device addresses.
  static std::uint64_t version = 0;
  o.mask_version = ++version;
  for (int i = 0; i < reps + 1; ++i) {
    fill_nan(g.o.view, stream);
    rt.run(g.request, stream, o);
    if (i > 0) t.push_back(rt.last_dispatch().kernel_ms);  // the first run warms up
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double check_against_reference(GpuCase& g, Stream stream) {
  DeviceTensor ref = make_device_tensor(DType::kFloat32, {g.o.view.shape[0], g.o.view.shape[1], g.o.view.shape[2], 128});
  AttentionRequest r = g.request;
  r.o = ref.view;
  fill_nan(ref.view, stream);
  const DeviceMaskState ms = build_mask_state_gpu(r.mask, stream);
  reference_attention_gpu(r, ms, stream);
  return relative_l2_gpu(g.o.view, ref.view, stream);
}

}  // namespace tessera::tools
