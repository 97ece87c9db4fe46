#include "tessera_corpus/score_field.hpp"

#include <array>
#include <cmath>

#include "tessera_corpus/rng.hpp"

namespace tessera::corpus {

namespace {
constexpr int kRank = 8;

struct Sigmas {
  double t, h, w;
};

Sigmas head_sigmas(HeadType type, const LatentGrid& g, Rng& r) {
  const double T = g.t, H = g.h, W = g.w;
  switch (type) {
    case HeadType::kTemporalWide: return {2.0 * T, r.uniform(0.17, 0.25) * H, r.uniform(0.10, 0.15) * W};
    case HeadType::kSpatialFrame: return {r.uniform(0.08, 0.15) * T, 1.5 * H, 1.5 * W};
    case HeadType::kLocal3d: return {r.uniform(0.15, 0.25) * T, r.uniform(0.15, 0.25) * H, r.uniform(0.10, 0.15) * W};
    case HeadType::kRow: return {r.uniform(0.1, 0.2) * T, r.uniform(0.04, 0.08) * H, 1.5 * W};
    case HeadType::kColumn: return {r.uniform(0.1, 0.2) * T, 1.5 * H, r.uniform(0.03, 0.05) * W};
  }
  return {T, H, W};
}
}  // namespace

const char* head_type_name(HeadType t) noexcept {
  switch (t) {
    case HeadType::kTemporalWide: return "temporal-wide";
    case HeadType::kSpatialFrame: return "spatial-frame";
    case HeadType::kLocal3d: return "local-3d";
    case HeadType::kRow: return "row";
    case HeadType::kColumn: return "column";
  }
  return "?";
}

HeadType field_head_type(const FieldKey& k) {
  Rng r(hash_combine(hash_combine(hash_combine(k.request_seed, 0x48454144), std::uint64_t(k.layer)), std::uint64_t(k.head)));
  const double u = r.uniform();
  const bool late = k.layer >= k.layers - std::max(1, k.layers / 10);
  if (late) return u < 0.85 ? HeadType::kSpatialFrame : (u < 0.95 ? HeadType::kTemporalWide : HeadType::kLocal3d);
  if (u < 0.40) return HeadType::kTemporalWide;
  if (u < 0.72) return HeadType::kSpatialFrame;
  if (u < 0.87) return HeadType::kLocal3d;
  if (u < 0.97) return HeadType::kRow;
  return HeadType::kColumn;
}

void score_field(const BlockLayout& q, const BlockLayout& kv, const FieldKey& k, std::vector<float>& out) {
  const LatentGrid& g = q.grid;
  const std::uint64_t layer_seed = hash_combine(hash_combine(k.request_seed, 0x4C415952), std::uint64_t(k.layer));
  const std::uint64_t head_seed = hash_combine(layer_seed, std::uint64_t(k.head) + 1000);
  // Objects of this (request, layer); centres drift linearly with the step.
  Rng ro(layer_seed);
  std::array<std::array<double, 3>, kRank> centre{}, radius{};
  const double drift = double(k.step) / std::max(1, k.steps);
  for (int m = 0; m < kRank; ++m) {
    const double dims[3] = {double(g.t), double(g.h), double(g.w)};
    for (int a = 0; a < 3; ++a) {
      const double c0 = ro.uniform(0, dims[a]), v = ro.uniform(-0.3, 0.3) * dims[a];
      centre[m][a] = c0 + v * drift;
      radius[m][a] = ro.uniform(0.08, 0.3) * dims[a];
    }
  }
  // Head parameters.
  Rng rh(head_seed);
  const HeadType type = field_head_type(k);
  const Sigmas sg = head_sigmas(type, g, rh);
  const double alpha = rh.uniform(1.0, 3.0);
  const double sink = rh.uniform() < 0.2 ? rh.uniform(1.0, 3.0) : 0.0;
  std::array<std::array<double, kRank>, kRank> A{}, B{};
  for (auto& row : A)
    for (auto& x : row) x = rh.normal();
  for (auto& row : B)
    for (auto& x : row) x = rh.normal();
  const double gamma = 0.6 + 0.8 * double(k.step) / std::max(1, k.steps);

  auto features = [&](const BlockLayout& L, const std::array<std::array<double, kRank>, kRank>& M) {
    std::vector<float> f(std::size_t(L.n_blocks) * kRank);
    for (std::int64_t b = 0; b < L.n_blocks; ++b) {
      double raw[kRank];
      const double x[3] = {L.ct[b], L.ch[b], L.cw[b]};
      for (int m = 0; m < kRank; ++m) {
        double e = 0;
        for (int a = 0; a < 3; ++a) {
          const double d = (x[a] - centre[m][a]) / radius[m][a];
          e += d * d;
        }
        raw[m] = std::exp(-0.5 * e);
      }
      for (int m = 0; m < kRank; ++m) {
        double s = 0;
        for (int n = 0; n < kRank; ++n) s += M[m][n] * raw[n];
        f[std::size_t(b) * kRank + m] = float(s);
      }
    }
    return f;
  };
  const std::vector<float> fq = features(q, A), fk = features(kv, B);
  const float sem = float(alpha / std::sqrt(double(kRank)));
  const float it = float(1.0 / sg.t), ih = float(1.0 / sg.h), iw = float(1.0 / sg.w);
  const std::int64_t nq = q.n_blocks, nk = kv.n_blocks;
  std::vector<float> kt(nk), kh(nk), kw(nk), ks(nk);
  for (std::int64_t j = 0; j < nk; ++j) {
    kt[j] = kv.ct[j] * it;
    kh[j] = kv.ch[j] * ih;
    kw[j] = kv.cw[j] * iw;
    ks[j] = kv.first_frame[j] == 0 ? float(sink) : 0.f;
  }
  out.resize(std::size_t(nq * nk));
  const std::uint64_t noise_seed = hash_combine(head_seed, 0x4E4F495345);
  const float g32 = float(gamma);
  for (std::int64_t i = 0; i < nq; ++i) {
    const float qt = q.ct[i] * it, qh = q.ch[i] * ih, qw = q.cw[i] * iw;
    const float* a = &fq[std::size_t(i) * kRank];
    float* o = &out[std::size_t(i * nk)];
    const std::uint64_t row_seed = mix64(noise_seed + std::uint64_t(i));
    for (std::int64_t j = 0; j < nk; ++j) {
      const float dt = qt - kt[j], dh = qh - kh[j], dw = qw - kw[j];
      const float* b = &fk[std::size_t(j) * kRank];
      float dot = 0;
      for (int m = 0; m < kRank; ++m) dot += a[m] * b[m];
      const std::uint64_t hsh = mix64(row_seed ^ std::uint64_t(j) * 0xD1B54A32D192ED03ull);
      const float noise = (float(hsh >> 40) * (1.0f / 16777216.0f) - 0.5f) * 0.6f;
      o[j] = g32 * (-0.5f * (dt * dt + dh * dh + dw * dw) + sem * dot + ks[j] + noise);
    }
  }
}

}  // namespace tessera::corpus
