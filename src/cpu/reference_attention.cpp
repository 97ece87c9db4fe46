// E(M) on the CPU in float64 (DESIGN.md section 1). Straightforward on purpose: for every (b, h, query token i)
// the scores over S(i) are formed in float64, then a two-pass softmax (max, then sum of exp(s - max)) gives O and
// LSE. Inputs are converted exactly to float64 first (every f16/bf16/f32 value is a double). Non-finite inputs:
// a NaN or +inf score in S(i), or every score -inf, gives O = NaN and LSE = NaN for that row (torch SDPA gives NaN);
// an empty S(i) gives O = 0 and LSE = -inf.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "core/half.hpp"
#include "core/reference_checks.hpp"
#include "tessera/reference.hpp"

namespace tessera {
namespace {

/// Converts `n` contiguous elements of dtype `t` starting at `src` to float64.
void load_row(const void* src, DType t, std::int64_t n, double* dst) {
  switch (t) {
    case DType::kFloat16: {
      const auto* p = static_cast<const std::uint16_t*>(src);
      for (std::int64_t i = 0; i < n; ++i) dst[i] = fp16_bits_to_float(p[i]);
      return;
    }
    case DType::kBFloat16: {
      const auto* p = static_cast<const std::uint16_t*>(src);
      for (std::int64_t i = 0; i < n; ++i) dst[i] = bf16_bits_to_float(p[i]);
      return;
    }
    case DType::kFloat32: {
      const auto* p = static_cast<const float*>(src);
      for (std::int64_t i = 0; i < n; ++i) dst[i] = p[i];
      return;
    }
    case DType::kFloat64: std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(double)); return;
    default: return;  // excluded by check_reference_request
  }
}

/// Address of element [i0, i1, i2, 0] of a rank-4 view.
const void* row_address(const TensorView& t, std::int64_t i0, std::int64_t i1, std::int64_t i2) {
  const std::int64_t off = i0 * t.stride[0] + i1 * t.stride[1] + i2 * t.stride[2];
  return static_cast<const unsigned char*>(t.data) + off * static_cast<std::int64_t>(dtype_size(t.dtype));
}

struct Problem {
  const AttentionRequest* request;
  const HostMaskState* mask;
  ProblemShape shape;
  double scale;
  ReferenceOutput* out;
};

/// Computes all query tokens of one (b, h). `kd` / `vd` cache the float64 K and V of one (b, kv head),
/// [N_kv, D], reloaded only when (b, kv head) changes (`cached` holds the current key, -1 initially).
void attend_head(const Problem& pb, std::int64_t b, std::int64_t h, std::vector<double>& kd, std::vector<double>& vd,
                 std::int64_t& cached) {
  const AttentionRequest& r = *pb.request;
  const ProblemShape& s = pb.shape;
  const MaskShape& ms = pb.mask->shape;
  const std::int64_t d_head = s.head_dim;
  const std::int64_t hk = h / (s.heads_q / s.heads_kv);
  const std::int64_t key = b * s.heads_kv + hk;
  if (cached != key) {
    kd.resize(static_cast<std::size_t>(s.n_kv * d_head));
    vd.resize(static_cast<std::size_t>(s.n_kv * d_head));
    for (std::int64_t j = 0; j < s.n_kv; ++j) {
      load_row(row_address(r.k, b, j, hk), r.k.dtype, d_head, kd.data() + j * d_head);
      load_row(row_address(r.v, b, j, hk), r.v.dtype, d_head, vd.data() + j * d_head);
    }
    cached = key;
  }
  const std::int64_t bm = ms.batch == 1 ? 0 : b;
  const std::int64_t hm = ms.heads == 1 ? 0 : h;
  const std::int64_t bq = r.geometry.block_q;
  const std::int64_t bkv = r.geometry.block_kv;
  std::vector<double> q(static_cast<std::size_t>(d_head));
  std::vector<double> scores;
  std::vector<std::int64_t> tokens;
  for (std::int64_t qb = 0; qb < s.n_qb; ++qb) {
    // S(i) is the same for every query token of the block: the tokens of its active kv blocks, below N_kv.
    tokens.clear();
    const std::int64_t row = (bm * ms.heads + hm) * s.n_qb + qb;
    for (std::int32_t a = pb.mask->row_offsets[row]; a < pb.mask->row_offsets[row + 1]; ++a) {
      const std::int64_t c = pb.mask->col_indices[a];
      for (std::int64_t j = c * bkv; j < std::min((c + 1) * bkv, s.n_kv); ++j) tokens.push_back(j);
    }
    scores.resize(tokens.size());
    for (std::int64_t i = qb * bq; i < std::min((qb + 1) * bq, s.n_q); ++i) {
      double* o = pb.out->o.data() + ((b * s.n_q + i) * s.heads_q + h) * d_head;
      double& lse = pb.out->lse[(b * s.heads_q + h) * s.n_q + i];
      std::fill(o, o + d_head, 0.0);
      if (tokens.empty()) {
        lse = -std::numeric_limits<double>::infinity();
        continue;
      }
      load_row(row_address(r.q, b, i, h), r.q.dtype, d_head, q.data());
      double m = -std::numeric_limits<double>::infinity();
      bool undefined = false;  // a NaN or +inf score: softmax undefined
      for (std::size_t t = 0; t < tokens.size(); ++t) {
        const double* k = kd.data() + tokens[t] * d_head;
        double dot = 0;
        for (std::int64_t d = 0; d < d_head; ++d) dot += q[d] * k[d];
        scores[t] = pb.scale * dot;
        if (std::isnan(scores[t]) || scores[t] == std::numeric_limits<double>::infinity()) undefined = true;
        m = std::max(m, scores[t]);
      }
      // NaN / +inf score, or every score -inf (0/0): the row is NaN, as in torch SDPA. Empty rows stay 0 / -inf.
      if (undefined || m == -std::numeric_limits<double>::infinity()) {
        std::fill(o, o + d_head, std::numeric_limits<double>::quiet_NaN());
        lse = std::numeric_limits<double>::quiet_NaN();
        continue;
      }
      double l = 0;
      for (std::size_t t = 0; t < tokens.size(); ++t) {
        const double p = std::exp(scores[t] - m);
        l += p;
        const double* v = vd.data() + tokens[t] * d_head;
        for (std::int64_t d = 0; d < d_head; ++d) o[d] += p * v[d];
      }
      for (std::int64_t d = 0; d < d_head; ++d) o[d] /= l;
      lse = m + std::log(l);
    }
  }
}

}  // namespace

ReferenceOutput reference_attention_cpu(const AttentionRequest& request, const HostMaskState& mask) {
  const ProblemShape shape = detail::check_reference_request(request, mask.shape, detail::ReferencePath::kCpu);
  detail::check_host_mask_state(mask);

  ReferenceOutput out;
  out.o.assign(static_cast<std::size_t>(shape.batch * shape.n_q * shape.heads_q * shape.head_dim), 0.0);
  out.lse.assign(static_cast<std::size_t>(shape.batch * shape.heads_q * shape.n_q),
                 -std::numeric_limits<double>::infinity());
  const Problem pb{&request, &mask, shape, request.effective_scale(), &out};

  // (b, h) items in order, split into contiguous ranges, one per thread: neighbouring query heads share a kv
  // head (GQA), so each thread converts each kv head it needs about once. Small problems run on this thread.
  const std::int64_t items = shape.batch * shape.heads_q;
  const double work = static_cast<double>(shape.n_q) * static_cast<double>(shape.n_kv) *
                      static_cast<double>(shape.head_dim) * static_cast<double>(items);  // dense upper bound
  std::int64_t threads = std::max<std::int64_t>(1, std::thread::hardware_concurrency());
  threads = std::min<std::int64_t>({threads, items, 16});
  if (work < 4e6) threads = 1;
  auto run_range = [&](std::int64_t begin, std::int64_t end) {
    std::vector<double> kd, vd;
    std::int64_t cached = -1;
    for (std::int64_t it = begin; it < end; ++it) attend_head(pb, it / shape.heads_q, it % shape.heads_q, kd, vd, cached);
  };
  if (threads <= 1) {
    run_range(0, items);
    return out;
  }
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads));
  for (std::int64_t t = 0; t < threads; ++t)
    pool.emplace_back(run_range, items * t / threads, items * (t + 1) / threads);
  for (auto& th : pool) th.join();
  return out;
}

}  // namespace tessera
