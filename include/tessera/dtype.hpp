#pragma once
/// @file dtype.hpp
/// Element types Tessera understands. Attention inputs are bf16 or fp16 (fp32 accumulation); fp32 and fp64
/// are accepted by the reference paths; bool/uint8 are dense block-mask types; int32 is the index type.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tessera {

/// Element type of a TensorView.
enum class DType : std::uint8_t {
  kFloat16,   ///< IEEE binary16 (2 bytes)
  kBFloat16,  ///< bfloat16 (2 bytes)
  kFloat32,   ///< IEEE binary32 (4 bytes)
  kFloat64,   ///< IEEE binary64 (8 bytes)
  kBool,      ///< one byte, 0 or 1 (dense block masks)
  kUInt8,     ///< one byte, 0 = inactive, non-zero = active (dense block masks)
  kInt32,     ///< 4-byte signed integer (block-CSR and index-list masks)
};

/// Size of one element in bytes.
constexpr std::size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::kFloat16:
    case DType::kBFloat16: return 2;
    case DType::kFloat32:
    case DType::kInt32: return 4;
    case DType::kFloat64: return 8;
    case DType::kBool:
    case DType::kUInt8: return 1;
  }
  return 0;
}

/// Lower-case name as used in plan ids and messages: "f16", "bf16", "f32", "f64", "bool", "u8", "i32".
constexpr std::string_view dtype_name(DType t) noexcept {
  switch (t) {
    case DType::kFloat16: return "f16";
    case DType::kBFloat16: return "bf16";
    case DType::kFloat32: return "f32";
    case DType::kFloat64: return "f64";
    case DType::kBool: return "bool";
    case DType::kUInt8: return "u8";
    case DType::kInt32: return "i32";
  }
  return "?";
}

}  // namespace tessera
