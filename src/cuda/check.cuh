#pragma once
// Error checking for CUDA runtime calls: every failure becomes tessera::Error(kCudaError).
#include <cuda_runtime.h>

#include <string>

#include "tessera/error.hpp"

namespace tessera::detail {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  throw Error(ErrorCode::kCudaError, "", std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) +
                                             ") in " + expr + " at " + file + ":" + std::to_string(line));
}

}  // namespace tessera::detail

/// Throws tessera::Error(kCudaError) when the CUDA call `expr` fails.
#define TESSERA_CUDA_CHECK(expr)                                                                 \
  do {                                                                                           \
    cudaError_t tessera_err_ = (expr);                                                           \
    if (tessera_err_ != cudaSuccess) ::tessera::detail::throw_cuda_error(tessera_err_, #expr, __FILE__, __LINE__); \
  } while (0)

/// Checks the last launch error (call right after a <<<>>> launch).
#define TESSERA_CUDA_CHECK_LAUNCH() TESSERA_CUDA_CHECK(cudaGetLastError())
