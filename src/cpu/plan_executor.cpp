// CPU plan executor: float64, tile by tile from the launch metadata.
#include "cpu/plan_executor.hpp"

#include <fmt/core.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/half.hpp"
#include "tessera/error.hpp"

namespace tessera {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool is_float(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat32 || t == DType::kFloat64;
}

double load(const TensorView& t, std::int64_t off) {
  const unsigned char* p = static_cast<const unsigned char*>(t.data) + off * static_cast<std::int64_t>(dtype_size(t.dtype));
  switch (t.dtype) {
    case DType::kFloat16: { std::uint16_t h; std::memcpy(&h, p, 2); return fp16_bits_to_float(h); }
    case DType::kBFloat16: { std::uint16_t h; std::memcpy(&h, p, 2); return bf16_bits_to_float(h); }
    case DType::kFloat32: { float f; std::memcpy(&f, p, 4); return f; }
    case DType::kFloat64: { double f; std::memcpy(&f, p, 8); return f; }
    default: return 0;
  }
}

void store(const TensorView& t, std::int64_t off, double x) {
  unsigned char* p = static_cast<unsigned char*>(t.data) + off * static_cast<std::int64_t>(dtype_size(t.dtype));
  switch (t.dtype) {
    case DType::kFloat16: { std::uint16_t h = float_to_fp16_bits(static_cast<float>(x)); std::memcpy(p, &h, 2); break; }
    case DType::kBFloat16: { std::uint16_t h = float_to_bf16_bits(static_cast<float>(x)); std::memcpy(p, &h, 2); break; }
    case DType::kFloat32: { float f = static_cast<float>(x); std::memcpy(p, &f, 4); break; }
    case DType::kFloat64: std::memcpy(p, &x, 8); break;
    default: break;
  }
}

void check_tensor(const TensorView& t, const char* name, std::int64_t d0, std::int64_t d1, std::int64_t d2,
                  std::int64_t d3, bool rank3 = false) {
  const int rank = rank3 ? 3 : 4;
  if (t.device != Device::kCpu) throw Error(ErrorCode::kInvalidArgument, name, "must be in CPU memory");
  if (!is_float(t.dtype) || (rank3 && t.dtype != DType::kFloat32 && t.dtype != DType::kFloat64))
    throw Error(ErrorCode::kInvalidArgument, name, fmt::format("unsupported dtype {}", dtype_name(t.dtype)));
  if (t.data == nullptr || t.rank != rank)
    throw Error(ErrorCode::kInvalidArgument, name, fmt::format("must be a rank-{} tensor with data", rank));
  const std::int64_t want[4] = {d0, d1, d2, d3};
  for (int i = 0; i < rank; ++i) {
    if (want[i] >= 0 && t.shape[i] != want[i])
      throw Error(ErrorCode::kInvalidArgument, name,
                  fmt::format("dimension {} is {}, expected {}", i, t.shape[i], want[i]));
  }
  if (!rank3 && t.stride[3] != 1 && t.shape[3] != 1)
    throw Error(ErrorCode::kInvalidArgument, name, "the head dimension must be contiguous");
}

// Per-query-row online-softmax state.
struct RowState {
  double m = kNegInf;
  double l = 0;
  std::int64_t n_keys = 0;  // active kv tokens scored
  bool undefined = false;   // a NaN or +inf score: softmax undefined, the row is NaN (torch SDPA does the same)
  std::vector<double> acc;
};

}  // namespace

void execute_plan_cpu(const HostTileMetadata& md, const TensorView& q, const TensorView& k, const TensorView& v,
                      const TensorView& o, const TensorView& lse, std::optional<double> scale_opt) {
  const prep::PrepParams& p = md.params;
  check_tensor(q, "q", p.batch, p.n_q, p.heads_q, -1);
  const std::int64_t D = q.shape[3];
  check_tensor(k, "k", p.batch, p.n_kv, -1, D);
  const std::int64_t H_kv = k.shape[2];
  if (H_kv < 1 || p.heads_q % H_kv != 0)
    throw Error(ErrorCode::kInvalidArgument, "k", fmt::format("H_kv = {} does not divide H_q = {}", H_kv, p.heads_q));
  check_tensor(v, "v", p.batch, p.n_kv, H_kv, D);
  check_tensor(o, "o", p.batch, p.n_q, p.heads_q, D);
  if (!lse.empty()) check_tensor(lse, "lse", p.batch, p.heads_q, p.n_q, 0, true);
  const double scale = scale_opt ? *scale_opt : 1.0 / std::sqrt(static_cast<double>(D));
  const std::int64_t group = p.heads_q / H_kv;
  const TileMetadataView mv = md.view();

  // Results are computed into float64 buffers first, written to o / lse at the end.
  std::vector<double> out_o(static_cast<std::size_t>(p.batch * p.n_q * p.heads_q * D), 0.0);
  std::vector<double> out_lse(static_cast<std::size_t>(p.batch * p.heads_q * p.n_q), kNegInf);
  std::vector<double> part_o(static_cast<std::size_t>(md.n_partials) * p.tile_q * D, 0.0);
  std::vector<double> part_lse(static_cast<std::size_t>(md.n_partials) * p.tile_q, kNegInf);
  std::vector<char> part_nonempty(static_cast<std::size_t>(md.n_partials) * p.tile_q, 0);  // per partial row
  std::vector<char> written(out_lse.size(), 0);

  std::vector<double> qrow(D), scores;
  std::vector<std::int64_t> keys;
  for (const WorkItem& w : md.items) {
    const std::int64_t hkv = w.head / group;
    for (std::int32_t qq = 0; qq < w.q_len; ++qq) {
      const std::int64_t i = w.q_start + qq;
      const std::int64_t qi = qq / md.sub_q;
      for (std::int64_t d = 0; d < D; ++d)
        qrow[d] = load(q, w.batch * q.stride[0] + i * q.stride[1] + w.head * q.stride[2] + d * q.stride[3]);
      RowState st;
      st.acc.assign(D, 0.0);
      for (std::int32_t e = w.entry_begin; e < w.entry_end; ++e) {
        // The tile's active kv tokens for this query row.
        keys.clear();
        auto add_range = [&](std::int64_t lo, std::int64_t hi) {
          for (std::int64_t j = lo; j < std::min(hi, p.n_kv); ++j) keys.push_back(j);
        };
        if (mv.gather_blocks) {
          for (int s = 0; s < p.pack; ++s) {
            const std::int32_t g = mv.gather_blocks[static_cast<std::int64_t>(e) * p.pack + s];
            if (g < 0) continue;
            if (mv.member && !((member_bits(mv.member, mv.member_bytes, e) >> (qi * 8 + s)) & 1)) continue;
            add_range(static_cast<std::int64_t>(g) * md.block_kv, static_cast<std::int64_t>(g + 1) * md.block_kv);
          }
        } else {
          const std::int64_t t0 = static_cast<std::int64_t>(mv.kv_tile[e]) * p.tile_kv;
          for (std::int64_t s0 = t0; s0 < t0 + p.tile_kv; s0 += md.sub_kv) {
            const std::int64_t kj = (s0 - t0) / md.sub_kv;
            if (mv.member && !((member_bits(mv.member, mv.member_bytes, e) >> (qi * 8 + kj)) & 1)) continue;
            add_range(s0, s0 + md.sub_kv);
          }
        }
        if (keys.empty()) continue;
        // Online-softmax update with this tile.
        scores.assign(keys.size(), 0.0);
        double tile_max = kNegInf;
        for (std::size_t t = 0; t < keys.size(); ++t) {
          const std::int64_t j = keys[t];
          double s = 0;
          for (std::int64_t d = 0; d < D; ++d)
            s += qrow[d] * load(k, w.batch * k.stride[0] + j * k.stride[1] + hkv * k.stride[2] + d * k.stride[3]);
          scores[t] = s * scale;
          if (std::isnan(scores[t]) || scores[t] == std::numeric_limits<double>::infinity()) st.undefined = true;
          tile_max = std::max(tile_max, scores[t]);
        }
        st.n_keys += static_cast<std::int64_t>(keys.size());
        if (st.undefined) continue;
        const double m_new = std::max(st.m, tile_max);
        const double alpha = st.m == kNegInf ? 0.0 : std::exp(st.m - m_new);
        st.l *= alpha;
        for (auto& a : st.acc) a *= alpha;
        for (std::size_t t = 0; t < keys.size(); ++t) {
          // A -inf score has weight 0 (m_new may itself be -inf while every score so far is -inf).
          const double pr = scores[t] == kNegInf ? 0.0 : std::exp(scores[t] - m_new);
          st.l += pr;
          const std::int64_t j = keys[t];
          for (std::int64_t d = 0; d < D; ++d)
            st.acc[d] += pr * load(v, w.batch * v.stride[0] + j * v.stride[1] + hkv * v.stride[2] + d * v.stride[3]);
        }
        st.m = m_new;
      }
      // Empty active set: O = 0, LSE = -inf. NaN / +inf score: NaN. Every score -inf: 0/0, NaN for a whole row;
      // for a split-KV partial, an empty-looking partial flagged non-empty (the merge decides).
      const bool any = st.l > 0 && !st.undefined;
      const bool nan_row = st.undefined || (st.n_keys > 0 && !any && w.partial < 0);
      const double row_lse = nan_row ? kNaN : any ? st.m + std::log(st.l) : kNegInf;
      if (w.partial >= 0 && st.n_keys > 0) part_nonempty[static_cast<std::size_t>(w.partial) * p.tile_q + qq] = 1;
      if (w.partial < 0) {
        const std::int64_t li = (w.batch * p.heads_q + w.head) * p.n_q + i;
        if (written[li]++) throw Error(ErrorCode::kInternal, "metadata.items", "query row written twice");
        out_lse[li] = row_lse;
        for (std::int64_t d = 0; d < D; ++d)
          out_o[((w.batch * p.n_q + i) * p.heads_q + w.head) * D + d] = nan_row ? kNaN : any ? st.acc[d] / st.l : 0.0;
      } else {
        part_lse[static_cast<std::size_t>(w.partial) * p.tile_q + qq] = row_lse;
        for (std::int64_t d = 0; d < D; ++d)
          part_o[(static_cast<std::size_t>(w.partial) * p.tile_q + qq) * D + d] = nan_row ? kNaN : any ? st.acc[d] / st.l : 0.0;
      }
    }
  }
  // Split-KV merge: LSE-weighted combination of the partials of every split query tile.
  for (std::size_t m = 0; m < md.merge_targets.size(); ++m) {
    const WorkItem& t = md.merge_targets[m];
    for (std::int32_t qq = 0; qq < t.q_len; ++qq) {
      const std::int64_t i = t.q_start + qq;
      double mx = kNegInf;
      bool nan_row = false, nonempty = false;
      for (std::int32_t s = md.merge_offsets[m]; s < md.merge_offsets[m + 1]; ++s) {
        const double ls = part_lse[static_cast<std::size_t>(s) * p.tile_q + qq];
        nan_row = nan_row || std::isnan(ls);
        nonempty = nonempty || part_nonempty[static_cast<std::size_t>(s) * p.tile_q + qq];
        if (!std::isnan(ls)) mx = std::max(mx, ls);
      }
      const std::int64_t li = (t.batch * p.heads_q + t.head) * p.n_q + i;
      if (written[li]++) throw Error(ErrorCode::kInternal, "metadata.merge_targets", "query row written twice");
      double* orow = &out_o[((t.batch * p.n_q + i) * p.heads_q + t.head) * D];
      if (nan_row || (mx == kNegInf && nonempty)) {  // NaN / +inf score, or every score -inf
        out_lse[li] = kNaN;
        for (std::int64_t d = 0; d < D; ++d) orow[d] = kNaN;
        continue;
      }
      if (mx == kNegInf) {
        out_lse[li] = kNegInf;
        continue;  // empty row: O stays 0
      }
      double wsum = 0;
      for (std::int32_t s = md.merge_offsets[m]; s < md.merge_offsets[m + 1]; ++s) {
        const double ls = part_lse[static_cast<std::size_t>(s) * p.tile_q + qq];
        if (ls == kNegInf) continue;
        const double wt = std::exp(ls - mx);
        wsum += wt;
        for (std::int64_t d = 0; d < D; ++d) orow[d] += wt * part_o[(static_cast<std::size_t>(s) * p.tile_q + qq) * D + d];
      }
      for (std::int64_t d = 0; d < D; ++d) orow[d] /= wsum;
      out_lse[li] = mx + std::log(wsum);
    }
  }
  for (std::size_t li = 0; li < written.size(); ++li) {
    if (!written[li]) throw Error(ErrorCode::kInternal, "metadata.items", fmt::format("query row {} never written", li));
  }
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t i = 0; i < p.n_q; ++i)
      for (std::int64_t h = 0; h < p.heads_q; ++h)
        for (std::int64_t d = 0; d < D; ++d)
          store(o, b * o.stride[0] + i * o.stride[1] + h * o.stride[2] + d * o.stride[3],
                out_o[((b * p.n_q + i) * p.heads_q + h) * D + d]);
  if (!lse.empty()) {
    for (std::int64_t b = 0; b < p.batch; ++b)
      for (std::int64_t h = 0; h < p.heads_q; ++h)
        for (std::int64_t i = 0; i < p.n_q; ++i)
          store(lse, b * lse.stride[0] + h * lse.stride[1] + i * lse.stride[2], out_lse[(b * p.heads_q + h) * p.n_q + i]);
  }
}

}  // namespace tessera
