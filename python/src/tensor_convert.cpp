// DLPack arrays -> tessera::TensorView.
#include "tensor_convert.hpp"

#include <string>

#include "tessera/error.hpp"

namespace tessera::py {

namespace nb = nanobind;

namespace {

[[noreturn]] void fail(const std::string& name, const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, name, message);
}

DType to_dtype(nb::dlpack::dtype t, const std::string& name) {
  using Code = nb::dlpack::dtype_code;
  const auto code = static_cast<Code>(t.code);
  if (t.lanes != 1) fail(name, "vector dtypes (lanes != 1) are not supported");
  if (code == Code::Float && t.bits == 16) return DType::kFloat16;
  if (code == Code::Bfloat && t.bits == 16) return DType::kBFloat16;
  if (code == Code::Float && t.bits == 32) return DType::kFloat32;
  if (code == Code::Float && t.bits == 64) return DType::kFloat64;
  if (code == Code::Bool && t.bits == 8) return DType::kBool;
  if (code == Code::UInt && t.bits == 8) return DType::kUInt8;
  if (code == Code::Int && t.bits == 32) return DType::kInt32;
  fail(name, "unsupported dtype (DLPack code " + std::to_string(t.code) + ", " + std::to_string(t.bits) +
                 " bits); expected float16, bfloat16, float32, float64, bool, uint8 or int32");
}

}  // namespace

TensorView to_view(const Array& a, const std::string& name) {
  TensorView v;
  const auto ndim = a.ndim();
  if (ndim > static_cast<std::size_t>(kMaxRank)) fail(name, "rank " + std::to_string(ndim) + " > 4");
  v.dtype = to_dtype(a.dtype(), name);
  if (a.device_type() == nb::device::cpu::value) {
    v.device = Device::kCpu;
  } else if (a.device_type() == nb::device::cuda::value) {
    v.device = Device::kCuda;
  } else {
    fail(name, "unsupported device (DLPack device type " + std::to_string(a.device_type()) + "); expected CPU or CUDA");
  }
  v.rank = static_cast<int>(ndim);
  for (std::size_t i = 0; i < ndim; ++i) {
    v.shape[i] = static_cast<std::int64_t>(a.shape(i));
    v.stride[i] = a.stride(i);
  }
  // Strides of dimensions with extent 0 or 1 are meaningless (DLPack producers report 0 or anything): make them
  // row-major so that contiguity checks see what they mean.
  std::int64_t row_major = 1;
  for (int i = static_cast<int>(ndim) - 1; i >= 0; --i) {
    if (v.shape[i] <= 1) v.stride[i] = row_major;
    row_major *= v.shape[i] > 0 ? v.shape[i] : 1;
  }
  v.data = const_cast<void*>(a.data());
  if (v.data == nullptr && v.numel() == 0) {
    // Torch gives empty tensors a null pointer; an empty mask array is still "given". Any non-null address works
    // since nothing is read from it.
    static std::int32_t sentinel = 0;
    v.data = &sentinel;
  }
  return v;
}

int device_ordinal(const Array& a) noexcept { return a.device_type() == nb::device::cuda::value ? a.device_id() : 0; }

}  // namespace tessera::py
