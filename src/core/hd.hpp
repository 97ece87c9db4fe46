#pragma once
// TESSERA_HD marks inline functions that both host code and CUDA device code call (the launch-preparation rules,
// query-tile decoding): __host__ __device__ under nvcc, nothing for the host compiler.
#if defined(__CUDACC__)
#define TESSERA_HD __host__ __device__
#else
#define TESSERA_HD
#endif
