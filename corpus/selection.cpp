#include "tessera_corpus/selection.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

namespace tessera::corpus {

void select_topk(const float* s, std::int64_t k, PackedMask& m, std::int64_t head, std::int64_t q,
                 std::vector<std::int32_t>& idx) {
  const std::int64_t n = m.n_kvb;
  k = std::clamp<std::int64_t>(k, 0, n);
  if (k == 0) return;
  if (k == n) {
    m.set_row(head, q);
    return;
  }
  idx.resize(std::size_t(n));
  std::iota(idx.begin(), idx.end(), 0);
  auto better = [s](std::int32_t a, std::int32_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); };
  std::nth_element(idx.begin(), idx.begin() + (k - 1), idx.end(), better);
  for (std::int64_t i = 0; i < k; ++i) m.set(head, q, idx[std::size_t(i)]);
}

std::int64_t select_cdf(const float* s, std::int64_t n, double beta, double threshold, std::int64_t min_keep,
                        std::vector<std::int32_t>* sel, std::vector<std::int32_t>& idx) {
  idx.resize(std::size_t(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [s](std::int32_t a, std::int32_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
  const double mx = s[idx[0]];
  double total = 0;
  for (std::int64_t j = 0; j < n; ++j) total += std::exp(beta * (double(s[idx[std::size_t(j)]]) - mx));
  double acc = 0;
  std::int64_t keep = 0;
  while (keep < n && acc < threshold * total) acc += std::exp(beta * (double(s[idx[std::size_t(keep++)]]) - mx));
  keep = std::clamp<std::int64_t>(std::max(keep, min_keep), 1, n);
  if (sel) sel->assign(idx.begin(), idx.begin() + keep);
  return keep;
}

double calibrate_cdf_beta(const std::vector<float>& scores, std::int64_t n_q, std::int64_t n_kv, double threshold,
                          double target, std::int64_t stride) {
  stride = std::max<std::int64_t>(1, stride);
  std::vector<std::vector<float>> rows;  // sampled rows, sorted descending, shifted so the max is 0
  for (std::int64_t i = 0; i < n_q; i += stride) {
    std::vector<float> r(scores.begin() + i * n_kv, scores.begin() + (i + 1) * n_kv);
    std::sort(r.begin(), r.end(), std::greater<float>());
    const float mx = r[0];
    for (auto& x : r) x -= mx;
    rows.push_back(std::move(r));
  }
  std::vector<double> e(static_cast<std::size_t>(n_kv));
  auto density = [&](double beta) {
    std::int64_t kept = 0;
    for (const auto& r : rows) {
      double total = 0;
      for (std::int64_t j = 0; j < n_kv; ++j) total += (e[std::size_t(j)] = std::exp(beta * double(r[std::size_t(j)])));
      double acc = 0;
      std::int64_t keep = 0;
      while (keep < n_kv && acc < threshold * total) acc += e[std::size_t(keep++)];
      kept += std::max<std::int64_t>(keep, 1);
    }
    return double(kept) / double(std::int64_t(rows.size()) * n_kv);
  };
  double lo = std::log(1e-3), hi = std::log(1e3);  // density decreases as beta grows
  for (int it = 0; it < 30; ++it) {
    const double mid = 0.5 * (lo + hi);
    if (density(std::exp(mid)) > target) lo = mid; else hi = mid;
  }
  return std::exp(0.5 * (lo + hi));
}

}  // namespace tessera::corpus
