#pragma once
// Host encoding of the TMA tensor maps of one attention launch (cuTensorMapEncodeTiled, reached through
// cudaGetDriverEntryPointByVersion so that nothing links libcuda). Q, K and V are 4-D tensors [B, N, H, D] with
// any element strides the launch validation accepts (multiples of 8 elements); a map views one as
// (D, N, H, B), innermost first, with boxes of 64 head-dim elements (128 bytes, 128-byte swizzle) x `box_rows`
// tokens x 1 head x 1 batch. Rows past N are zero-filled by the hardware.
#include <cuda.h>

#include <cstdint>

#include "tessera/dtype.hpp"

namespace tessera::kernels::wgmma {

/// One 4-D operand to describe: base pointer (16-byte aligned), extents and strides in elements.
struct TensorMapSpec {
  const void* base = nullptr;
  DType dtype = DType::kBFloat16;
  std::int64_t batch = 0, tokens = 0, heads = 0, head_dim = 0;
  std::int64_t stride_b = 0, stride_n = 0, stride_h = 0;  ///< elements; the head dimension is contiguous
  int box_rows = 0;                                       ///< tokens per box (1..256)
};

/// Encodes `spec` into `map`. Throws Error(kInvalidArgument, arg) naming `arg` (e.g. "k") when the driver rejects
/// the description (alignment, strides, extents), and Error(kCudaError) when the driver entry point is missing.
void encode_tensor_map(CUtensorMap& map, const TensorMapSpec& spec, const char* arg);

}  // namespace tessera::kernels::wgmma
