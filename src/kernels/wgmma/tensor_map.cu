#include "kernels/wgmma/tensor_map.hpp"

#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <string>

#include "tessera/error.hpp"

namespace tessera::kernels::wgmma {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    const cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q);
    if (err != cudaSuccess || q != cudaDriverEntryPointSuccess || p == nullptr)
      throw Error(ErrorCode::kCudaError, "driver", "cuTensorMapEncodeTiled is not available from the CUDA driver");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

}  // namespace

void encode_tensor_map(CUtensorMap& map, const TensorMapSpec& s, const char* arg) {
  const cuuint64_t dims[4] = {cuuint64_t(s.head_dim), cuuint64_t(s.tokens), cuuint64_t(s.heads), cuuint64_t(s.batch)};
  // Byte strides of dimensions 1..3 (dimension 0 is contiguous).
  const cuuint64_t strides[3] = {cuuint64_t(s.stride_n) * 2, cuuint64_t(s.stride_h) * 2, cuuint64_t(s.stride_b) * 2};
  const cuuint32_t box[4] = {64, cuuint32_t(s.box_rows), 1, 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  const CUtensorMapDataType type =
      s.dtype == DType::kFloat16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const CUresult r = encoder()(&map, type, 4, const_cast<void*>(s.base), dims, strides, box, elem_strides,
                               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error(ErrorCode::kInvalidArgument, arg,
                "the tensor-memory accelerator cannot describe this tensor (CUresult " + std::to_string(int(r)) +
                    "): shape [" + std::to_string(s.batch) + ", " + std::to_string(s.tokens) + ", " +
                    std::to_string(s.heads) + ", " + std::to_string(s.head_dim) + "], strides (" +
                    std::to_string(s.stride_b) + ", " + std::to_string(s.stride_n) + ", " + std::to_string(s.stride_h) +
                    ") elements, box rows " + std::to_string(s.box_rows));
}

}  // namespace tessera::kernels::wgmma
