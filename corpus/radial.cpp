#include "tessera_corpus/radial.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>

#include "tessera/error.hpp"

namespace tessera::corpus {

namespace {
int bitlen(std::uint64_t x) { return int(std::bit_width(x)); }
}  // namespace

PackedMask radial_mask(int frames, std::int64_t tpf, int block, double decay, bool wan) {
  if (frames <= 0) throw Error(ErrorCode::kInvalidArgument, "frames", "must be positive");
  if (tpf <= 0) throw Error(ErrorCode::kInvalidArgument, "tokens_per_frame", "must be positive");
  if (block < 16 || block % 16) throw Error(ErrorCode::kInvalidArgument, "block", "must be a positive multiple of 16");
  const std::int64_t n = frames * tpf, nb = (n + block - 1) / block, bound = n / block;
  const std::int64_t per = (tpf + block - 1) / block;  // blocks per frame pair buffer side
  PackedMask m(1, nb, nb);
  const double pow_tpf = std::ldexp(1.0, bitlen(std::uint64_t(tpf)));
  for (int i = 0; i < frames; ++i)
    for (int j = 0; j < frames; ++j) {
      const int d = std::abs(i - j);
      bool all = false, none = false;
      double width = 0;
      if (j == 0) {
        all = true;
      } else {
        if (d < 1) width = double(tpf);
        else if (d == 1) width = wan ? double(tpf / 2) : double(tpf);
        else width = std::max(pow_tpf / std::ldexp(1.0, bitlen(std::uint64_t(d))) * decay, double(block));
        const double split_len = pow_tpf / std::ldexp(1.0, bitlen(std::uint64_t(d)));
        if (split_len < 128.0) {
          const int split = int(128.0 / split_len);
          if (d % split != 0) none = true;
        }
      }
      if (none) continue;
      const std::int64_t rr = (std::int64_t(i) * tpf) % block, rc = (std::int64_t(j) * tpf) % block;
      const std::int64_t br0 = (std::int64_t(i) * tpf) / block, bc0 = (std::int64_t(j) * tpf) / block;
      for (std::int64_t a = 0; a < per; ++a) {
        const std::int64_t r0 = std::max<std::int64_t>(0, a * block - rr), r1 = std::min(tpf, (a + 1) * block - rr);
        if (r0 >= r1 || br0 + a >= nb) continue;
        for (std::int64_t b = 0; b < per; ++b) {
          if (bc0 + b >= nb) continue;
          std::int64_t nonzero = 0, high = 0;
          for (std::int64_t col = b * block; col < (b + 1) * block; ++col) {
            const std::int64_t y = col - rc;
            if (y < 0 || y >= tpf) continue;
            std::int64_t cnt;
            if (all) {
              cnt = r1 - r0;
            } else {
              const std::int64_t lo = std::max<std::int64_t>(r0, std::int64_t(std::ceil(double(y) - width)));
              const std::int64_t hi = std::min<std::int64_t>(r1 - 1, std::int64_t(std::floor(double(y) + width)));
              cnt = std::max<std::int64_t>(0, hi - lo + 1);
            }
            if (cnt > 0) ++nonzero;
            if (double(cnt) / double(block) > 1.0 / 3.0) ++high;
          }
          if (double(high) / (double(nonzero) + 1e-9) > 0.6) m.set(0, br0 + a, bc0 + b);
        }
      }
    }
  for (std::int64_t r = bound; r < nb; ++r) m.set_row(0, r);
  for (std::int64_t r = 0; r < nb; ++r)
    if (bound < nb) m.set_range(0, r, bound, nb);
  return m;
}

void radial_model(const CaseContext& c, double decay, PackedMask& m, HeadNotes& notes) {
  const LatentGrid& g = c.q->grid;
  static std::mutex mu;
  static std::map<std::tuple<int, std::int64_t, int, double>, PackedMask> cache;
  PackedMask one;
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto key = std::make_tuple(g.t, std::int64_t(g.h) * g.w, c.q->block, decay);
    auto it = cache.find(key);
    if (it == cache.end()) it = cache.emplace(key, radial_mask(g.t, std::int64_t(g.h) * g.w, c.q->block, decay, true)).first;
    one = it->second;
  }
  for (std::size_t h = 0; h < c.head_ids.size(); ++h) {
    std::copy(one.bits.begin(), one.bits.end(), m.bits.begin() + std::int64_t(h) * m.n_qb * m.row_bytes);
    notes.push_back(fmt::format("static decay={} (same mask for all heads, layers, steps)", decay));
  }
}

}  // namespace tessera::corpus
