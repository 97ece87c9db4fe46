#pragma once
/// @file tensor.hpp
/// A non-owning view of a strided tensor in CPU or GPU memory (like DLPack's DLTensor, without the
/// dependency). Tessera never allocates or frees the memory a TensorView points at.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>

#include "tessera/dtype.hpp"

namespace tessera {

/// Where a tensor's memory lives.
enum class Device : std::uint8_t { kCpu, kCuda };

/// Largest rank Tessera uses (Q/K/V/O and dense block masks are rank 4).
inline constexpr int kMaxRank = 4;

/// Non-owning strided tensor view.
/// - shape[i]: extent of dimension i (elements); only the first `rank` entries are meaningful.
/// - stride[i]: distance in *elements* (not bytes) between consecutive indices of dimension i.
/// An empty view (data == nullptr, rank == 0) means "not given" for optional arguments such as LSE.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  Device device = Device::kCpu;
  int rank = 0;
  std::array<std::int64_t, kMaxRank> shape{};
  std::array<std::int64_t, kMaxRank> stride{};

  /// True when no tensor was given (data is null and rank is 0).
  bool empty() const noexcept { return data == nullptr && rank == 0; }
  /// Number of elements (product of the shape; 1 for rank 0).
  std::int64_t numel() const noexcept {
    std::int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= shape[i];
    return n;
  }
  /// True when the strides are the row-major (C-contiguous) strides of the shape (an empty tensor, numel 0: always).
  bool is_contiguous() const noexcept {
    if (numel() == 0) return true;  // no element is addressed: any strides describe the same (empty) layout
    std::int64_t s = 1;
    for (int i = rank - 1; i >= 0; --i) {
      if (shape[i] != 1 && stride[i] != s) return false;
      s *= shape[i];
    }
    return true;
  }
};

/// Builds a row-major contiguous view of `data` with the given shape (rank = shape.size() <= 4).
inline TensorView make_tensor(void* data, DType dtype, Device device, std::span<const std::int64_t> shape) {
  TensorView t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  t.rank = static_cast<int>(shape.size());
  std::int64_t st = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    t.shape[d] = shape[d];
    t.stride[d] = st;
    st *= shape[d];
  }
  return t;
}

/// As above, for a braced shape: make_tensor(p, DType::kBFloat16, Device::kCuda, {B, N, H, D}).
inline TensorView make_tensor(void* data, DType dtype, Device device, std::initializer_list<std::int64_t> shape) {
  return make_tensor(data, dtype, device, std::span<const std::int64_t>(shape.begin(), shape.size()));
}

/// Builds a strided view; `shape` and `stride` must have the same length (<= 4); strides in elements.
inline TensorView make_strided_tensor(void* data, DType dtype, Device device, std::initializer_list<std::int64_t> shape,
                                      std::initializer_list<std::int64_t> stride) {
  TensorView t = make_tensor(data, dtype, device, shape);
  int i = 0;
  for (auto s : stride) t.stride[i++] = s;
  return t;
}

}  // namespace tessera
