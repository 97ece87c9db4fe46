#pragma once
/// @file rng.hpp
/// Deterministic, platform-independent random numbers for the corpus (SplitMix64; no std:: distributions,
/// whose output is implementation-defined). Every case derives its stream from (seed, source, chunk, ...) by
/// hashing, so any case can be produced on its own and in any order.
#include <cmath>
#include <cstdint>
#include <string_view>

namespace tessera::corpus {

/// SplitMix64 finaliser of x.
constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
/// Combines a hash with a value.
constexpr std::uint64_t hash_combine(std::uint64_t h, std::uint64_t v) noexcept { return mix64(h ^ mix64(v)); }
/// FNV-1a of a string (source ids into seeds).
constexpr std::uint64_t hash_string(std::string_view s) noexcept {
  std::uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ std::uint8_t(c)) * 1099511628211ull;
  return h;
}

/// A SplitMix64 stream.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) noexcept : s_(seed) {}
  std::uint64_t next() noexcept { return mix64(s_++ * 0x632BE59BD9B4E019ull); }
  /// Uniform double in [0, 1).
  double uniform() noexcept { return double(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) noexcept { return lo + (hi - lo) * uniform(); }
  /// Uniform integer in [0, n).
  std::uint64_t below(std::uint64_t n) noexcept { return n ? next() % n : 0; }
  /// Standard normal (Box-Muller).
  double normal() noexcept {
    const double u = 1.0 - uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  }

 private:
  std::uint64_t s_;
};

}  // namespace tessera::corpus
