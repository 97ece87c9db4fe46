#pragma once
// A random attention request in GPU memory with its host copy for the float64 reference (Runtime GPU tests).
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "device_tensor.hpp"
#include "gpu_test_util.hpp"
#include "host_tensor.hpp"
#include "mask_gen.hpp"
#include "tessera/mask_state.hpp"
#include "tessera/reference.hpp"
#include "tessera/runtime.hpp"

namespace tessera::runtime_test {

using testing::DeviceTensor;
using testing::HostTensor;

/// A request in GPU memory (req) and its host copy for the reference (host_req).
struct GpuCase {
  HostTensor q, k, v;
  DeviceTensor dq, dk, dv, dout, dmask;
  testing::HostMaskTensors host_mask;
  AttentionRequest host_req, req;
  std::int64_t n = 0, hq = 0, d = 0;
};

/// 1 x n tokens x hq query heads (hkv KV heads) x d, `dtype`, with a dense device mask of `density` (row-density
/// pattern) on bq x bkv blocks; the output starts poisoned (NaN).
inline GpuCase make_case(std::uint64_t seed, int bq, int bkv, std::int64_t n, std::int64_t hq, std::int64_t hkv, std::int64_t d,
                  DType dtype, double density) {
  GpuCase c;
  c.n = n, c.hq = hq, c.d = d;
  std::mt19937_64 g(seed);
  c.q = HostTensor(dtype, {1, n, hq, d});
  c.k = HostTensor(dtype, {1, n, hkv, d});
  c.v = HostTensor(dtype, {1, n, hkv, d});
  c.q.fill_normal(seed * 3 + 1);
  c.k.fill_normal(seed * 3 + 2);
  c.v.fill_normal(seed * 3 + 3);
  MaskShape s{1, hq, (n + bq - 1) / bq, (n + bkv - 1) / bkv};
  const auto bits = testing::random_mask_bits(s, testing::MaskPattern::kRowDensity, density, g);
  c.host_mask = testing::encode_dense(s, bits);
  HostTensor m(DType::kUInt8, {1, hq, s.n_qb, s.n_kvb});
  std::copy(bits.begin(), bits.end(), m.bytes.begin());
  c.dq = testing::upload(c.q);
  c.dk = testing::upload(c.k);
  c.dv = testing::upload(c.v);
  HostTensor out(dtype, {1, n, hq, d});
  out.poison();
  c.dout = testing::upload(out);
  c.dmask = testing::upload(m);
  c.host_req.q = c.q.view();
  c.host_req.k = c.k.view();
  c.host_req.v = c.v.view();
  c.host_req.o = c.q.view();  // unused by the reference
  c.host_req.geometry = {bq, bkv};
  c.host_req.mask = c.host_mask.mask;
  c.req.q = c.dq.view();
  c.req.k = c.dk.view();
  c.req.v = c.dv.view();
  c.req.o = c.dout.view();
  c.req.geometry = {bq, bkv};
  c.req.mask = BlockMask::from_dense(c.dmask.view());
  return c;
}

// Relative L2 error of the case's device output against a reference output.
inline double error_vs(const GpuCase& c, const ReferenceOutput& ref) {
  const HostTensor o = testing::download(c.dout);
  std::vector<double> got(ref.o.size());
  for (std::size_t i = 0; i < got.size(); ++i) got[i] = o.get(static_cast<std::int64_t>(i));
  return testing::relative_l2(got.data(), ref.o.data(), static_cast<std::int64_t>(got.size()));
}

inline ReferenceOutput reference_of(const GpuCase& c) {
  return reference_attention_cpu(c.host_req, build_mask_state_cpu(c.host_req.mask));
}

inline double error_vs_reference(const GpuCase& c) { return error_vs(c, reference_of(c)); }

inline void poison(GpuCase& c) {
  HostTensor out(c.q.dtype, {1, c.n, c.hq, c.d});
  out.poison();
  testing::upload_into(out, c.dout);
}

}  // namespace tessera::runtime_test
