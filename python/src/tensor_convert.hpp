#pragma once
// DLPack arrays (numpy, torch, anything with __dlpack__) -> tessera::TensorView, without copying.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <string>

#include "tessera/tensor.hpp"

namespace tessera::py {

/// Any read-only DLPack array (the extension only reads or writes through the view; it never allocates).
using Array = nanobind::ndarray<nanobind::ro>;

/// View of `a` (rank <= 4; strides in elements, as DLPack gives them). dtypes: f16, bf16, f32, f64, bool, u8, i32.
/// Devices: CPU and CUDA. Throws tessera::Error(kInvalidArgument, `name`) otherwise.
TensorView to_view(const Array& a, const std::string& name);

/// CUDA device ordinal of `a` (0 for CPU arrays).
int device_ordinal(const Array& a) noexcept;

}  // namespace tessera::py
