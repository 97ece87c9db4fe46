#pragma once
// Test helpers: owning host tensors with TensorView access, random fills, poison values.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/half.hpp"
#include "tessera/tensor.hpp"

namespace tessera::testing {

/// Owning host buffer of `numel` elements of `dtype` (stored as raw bytes) plus a contiguous view.
struct HostTensor {
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;
  std::vector<unsigned char> bytes;

  HostTensor() = default;
  HostTensor(DType t, std::vector<std::int64_t> s) : dtype(t), shape(std::move(s)) {
    bytes.assign(static_cast<std::size_t>(numel()) * dtype_size(dtype), 0);
  }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
  void* data() { return bytes.data(); }
  /// Contiguous CPU view.
  TensorView view() { return make_tensor(bytes.data(), dtype, Device::kCpu, shape); }
  /// Element i as double (floating dtypes and int32/uint8/bool).
  double get(std::int64_t i) const {
    const unsigned char* p = bytes.data() + i * dtype_size(dtype);
    switch (dtype) {
      case DType::kFloat16: { std::uint16_t h; std::memcpy(&h, p, 2); return fp16_bits_to_float(h); }
      case DType::kBFloat16: { std::uint16_t h; std::memcpy(&h, p, 2); return bf16_bits_to_float(h); }
      case DType::kFloat32: { float f; std::memcpy(&f, p, 4); return f; }
      case DType::kFloat64: { double f; std::memcpy(&f, p, 8); return f; }
      case DType::kInt32: { std::int32_t f; std::memcpy(&f, p, 4); return f; }
      case DType::kBool:
      case DType::kUInt8: return *p;
    }
    return 0;
  }
  /// Sets element i from a double (rounded to nearest even for 16-bit floats).
  void set(std::int64_t i, double x) {
    unsigned char* p = bytes.data() + i * dtype_size(dtype);
    switch (dtype) {
      case DType::kFloat16: { std::uint16_t h = float_to_fp16_bits(static_cast<float>(x)); std::memcpy(p, &h, 2); break; }
      case DType::kBFloat16: { std::uint16_t h = float_to_bf16_bits(static_cast<float>(x)); std::memcpy(p, &h, 2); break; }
      case DType::kFloat32: { float f = static_cast<float>(x); std::memcpy(p, &f, 4); break; }
      case DType::kFloat64: std::memcpy(p, &x, 8); break;
      case DType::kInt32: { std::int32_t v = static_cast<std::int32_t>(x); std::memcpy(p, &v, 4); break; }
      case DType::kBool:
      case DType::kUInt8: *p = static_cast<unsigned char>(x); break;
    }
  }
  /// Fills with independent N(0, 1) values (fresh data for every check: pass a new seed).
  void fill_normal(std::uint64_t seed) {
    std::mt19937_64 g(seed);
    std::normal_distribution<double> n(0.0, 1.0);
    for (std::int64_t i = 0; i < numel(); ++i) set(i, n(g));
  }
  /// Poisons every element with NaN (floats) or 0x7f7f7f7f-style bytes (ints) so unwritten outputs are caught.
  void poison() {
    if (dtype == DType::kFloat16 || dtype == DType::kBFloat16 || dtype == DType::kFloat32 || dtype == DType::kFloat64) {
      for (std::int64_t i = 0; i < numel(); ++i) set(i, std::numeric_limits<double>::quiet_NaN());
    } else {
      std::memset(bytes.data(), 0x7f, bytes.size());
    }
  }
};

/// Relative L2 error ||a - b|| / ||b|| over n doubles; +inf if any NaN is present in a.
inline double relative_l2(const double* a, const double* b, std::int64_t n) {
  double num = 0, den = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (std::isnan(a[i])) return std::numeric_limits<double>::infinity();
    const double d = a[i] - b[i];
    num += d * d;
    den += b[i] * b[i];
  }
  if (den == 0) return num == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

}  // namespace tessera::testing
