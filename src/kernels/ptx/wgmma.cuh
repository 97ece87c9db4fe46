#pragma once
// wgmma (sm_90a): warpgroup matrix multiply-accumulate D (fp32, registers) += A * B for one m64nNk16 step, issued
// asynchronously by the 128 threads of a warpgroup (4 consecutive warps starting at a multiple of 4).
//
//   SS form: A and B from shared memory, each described by a 64-bit matrix descriptor (make_smem_desc).
//   RS form: A from registers in the mma.sync m16n8k16 A layout of each warp's 16 rows (warp w of the warpgroup holds
//            rows 16w..16w+15; ptx/mma.cuh documents the four registers), B from shared memory.
//   Accumulators: warp w, lane l (g = l / 4, t = l % 4) holds d[4i + 0..1] = D[16w + g][8i + 2t .. 8i + 2t + 1] and
//            d[4i + 2..3] = D[16w + g + 8][8i + 2t .. 8i + 2t + 1] for i < N / 8: the m16n8 layout repeated along N.
//   kTransB = 0: B is "K-major" (N rows of K contiguous elements, like K in S = Q K^T); 1: B is "MN-major" (K rows of
//            N contiguous elements, like V in O = P V).
//   kTransA (SS form only; default 0): 0: A is K-major (M rows of K contiguous elements, like Q or K); 1: A is
//            MN-major (K rows of M contiguous elements: V read as V^T in the swapped product O^T = V^T P^T).
//
// Ordering (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"): wgmma_fence() before the first
// wgmma of a batch and whenever the accumulator or A registers were written by other instructions; wgmma_commit()
// closes a group; wgmma_wait<N>() waits until at most N groups are pending. The compiler does not know that the
// accumulators are written asynchronously: fence_operand() on every accumulator register before the batch and
// after the wait keeps it from moving their reads or writes across (CUTLASS's warpgroup_fence_operand).
// The wrappers exist for the catalog's N: 64 and 128 (S = Q K^T, O += P V), and 16 and 32, the query columns of the
// swapped products of 16- and 32-row query tiles (S^T = K Q^T with A = K, O^T += V^T P^T with A = V^T MN-major).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/ptx/arch.cuh"

namespace tessera::ptx {

/// Shared-memory matrix descriptor for a 128-byte-swizzled operand (the layout TMA writes with
/// CU_TENSOR_MAP_SWIZZLE_128B into a 1024-byte-aligned buffer: rows of 128 bytes, 8-row atoms of 1024 bytes).
/// addr: shared address of the operand's first element (may be advanced by 32-byte k steps inside a row);
/// lbo, sbo: leading / stride byte offsets (PTX ISA "Matrix Descriptor Format"; K-major: sbo = 1024 between 8-row
/// groups, lbo unused; MN-major: lbo = bytes between 64-element column panels, sbo = 1024 between 8-row k groups).
__device__ __forceinline__ std::uint64_t make_smem_desc(std::uint32_t addr, std::uint32_t lbo, std::uint32_t sbo) {
  std::uint64_t d = 0;
  d |= std::uint64_t((addr & 0x3FFFF) >> 4);
  d |= std::uint64_t((lbo & 0x3FFFF) >> 4) << 16;
  d |= std::uint64_t((sbo & 0x3FFFF) >> 4) << 32;
  d |= std::uint64_t(1) << 62;  // swizzle mode 1: 128-byte swizzle
  return d;
}

/// wgmma.fence.sync.aligned (see the header comment).
__device__ __forceinline__ void wgmma_fence() {
#if TESSERA_SM90A
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}

/// wgmma.commit_group.sync.aligned: closes the group of wgmma issued since the last commit.
__device__ __forceinline__ void wgmma_commit() {
#if TESSERA_SM90A
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}

/// wgmma.wait_group.sync.aligned N: waits until at most N committed groups are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if TESSERA_SM90A
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#else
  __trap();
#endif
}

/// Keeps the compiler from moving accesses of register `x` across this point (no instruction).
__device__ __forceinline__ void fence_operand(float& x) { asm volatile("" : "+f"(x)::"memory"); }
__device__ __forceinline__ void fence_operand(std::uint32_t& x) { asm volatile("" : "+r"(x)::"memory"); }

/// setmaxnreg.inc / .dec (sm_90a): raises or lowers this warpgroup's per-thread register limit to R (multiple of 8 in
/// 24..256). Takes effect only in a kernel with a register cap at entry (__launch_bounds__ with min blocks).
template <int R>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(R % 8 == 0 && R >= 24 && R <= 256, "setmaxnreg: multiple of 8 in 24..256");
#if TESSERA_SM90A
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
#endif
}
template <int R>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(R % 8 == 0 && R >= 24 && R <= 256, "setmaxnreg: multiple of 8 in 24..256");
#if TESSERA_SM90A
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
#endif
}

/// D (+)= A * B, m64nNk16, A and B shared (descriptors). accumulate = false overwrites D (scale-d = 0).
template <int N, int kTransB, class T, int kTransA = 0>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b,
                                         bool accumulate);

/// D (+)= A * B, m64nNk16, A from registers (mma.sync A layout), B shared (descriptor).
template <int N, int kTransB, class T>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t desc_b,
                                         bool accumulate);

// The instruction wrappers: one asm statement per (N, dtype, kTransA, kTransB) and form, stamped out by two macros. Each N's
// accumulator operands are spelled once: TESSERA_WGMMA_D<N> (register names) and TESSERA_WGMMA_OUT<N> (constraints);
// the other operands' numbers (A, B, scale-d) follow them and are passed as strings.
#define TESSERA_WGMMA_D16 "{%0, %1, %2, %3, %4, %5, %6, %7}"
#define TESSERA_WGMMA_OUT16 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
#define TESSERA_WGMMA_D32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define TESSERA_WGMMA_OUT32 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define TESSERA_WGMMA_D64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define TESSERA_WGMMA_OUT64 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define TESSERA_WGMMA_D128 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define TESSERA_WGMMA_OUT128 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

#if TESSERA_SM90A
#define TESSERA_WGMMA_SS(N, TA, TB, CTYPE, PTYPE, A, B, SCALE_D)                                                 \
  template <>                                                                                                   \
  __device__ __forceinline__ void wgmma_ss<N, TB, CTYPE, TA>(float (&d)[N / 2], std::uint64_t desc_a,           \
                                                             std::uint64_t desc_b, bool accumulate) {           \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" SCALE_D ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N       \
                 "k16.f32." PTYPE "." PTYPE " " TESSERA_WGMMA_D##N ", %" A ", %" B ", p, 1, 1, " #TA ", " #TB    \
                 ";\n}\n"                                                                                      \
                 : TESSERA_WGMMA_OUT##N                                                                         \
                 : "l"(desc_a), "l"(desc_b), "r"(int(accumulate)));                                             \
  }
#define TESSERA_WGMMA_RS(N, TB, CTYPE, PTYPE, A, B, SCALE_D)                                                     \
  template <>                                                                                                   \
  __device__ __forceinline__ void wgmma_rs<N, TB, CTYPE>(float (&d)[N / 2], const std::uint32_t (&a)[4],        \
                                                         std::uint64_t desc_b, bool accumulate) {               \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" SCALE_D ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N       \
                 "k16.f32." PTYPE "." PTYPE " " TESSERA_WGMMA_D##N ", " A ", %" B ", p, 1, 1, " #TB ";\n}\n"     \
                 : TESSERA_WGMMA_OUT##N                                                                         \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(int(accumulate)));              \
  }
#else
#define TESSERA_WGMMA_SS(N, TA, TB, CTYPE, PTYPE, A, B, SCALE_D)                                                 \
  template <>                                                                                                   \
  __device__ __forceinline__ void wgmma_ss<N, TB, CTYPE, TA>(float (&)[N / 2], std::uint64_t, std::uint64_t,    \
                                                             bool) {                                            \
    __trap();                                                                                                   \
  }
#define TESSERA_WGMMA_RS(N, TB, CTYPE, PTYPE, A, B, SCALE_D)                                                     \
  template <>                                                                                                   \
  __device__ __forceinline__ void wgmma_rs<N, TB, CTYPE>(float (&)[N / 2], const std::uint32_t (&)[4],          \
                                                         std::uint64_t, bool) {                                 \
    __trap();                                                                                                   \
  }
#endif

TESSERA_WGMMA_SS(64, 0, 0, __nv_bfloat16, "bf16", "32", "33", "34")
TESSERA_WGMMA_RS(64, 0, __nv_bfloat16, "bf16", "{%32, %33, %34, %35}", "36", "37")
TESSERA_WGMMA_SS(64, 0, 1, __nv_bfloat16, "bf16", "32", "33", "34")
TESSERA_WGMMA_RS(64, 1, __nv_bfloat16, "bf16", "{%32, %33, %34, %35}", "36", "37")
TESSERA_WGMMA_SS(128, 0, 0, __nv_bfloat16, "bf16", "64", "65", "66")
TESSERA_WGMMA_RS(128, 0, __nv_bfloat16, "bf16", "{%64, %65, %66, %67}", "68", "69")
TESSERA_WGMMA_SS(128, 0, 1, __nv_bfloat16, "bf16", "64", "65", "66")
TESSERA_WGMMA_RS(128, 1, __nv_bfloat16, "bf16", "{%64, %65, %66, %67}", "68", "69")
TESSERA_WGMMA_SS(64, 0, 0, __half, "f16", "32", "33", "34")
TESSERA_WGMMA_RS(64, 0, __half, "f16", "{%32, %33, %34, %35}", "36", "37")
TESSERA_WGMMA_SS(64, 0, 1, __half, "f16", "32", "33", "34")
TESSERA_WGMMA_RS(64, 1, __half, "f16", "{%32, %33, %34, %35}", "36", "37")
TESSERA_WGMMA_SS(128, 0, 0, __half, "f16", "64", "65", "66")
TESSERA_WGMMA_RS(128, 0, __half, "f16", "{%64, %65, %66, %67}", "68", "69")
TESSERA_WGMMA_SS(128, 0, 1, __half, "f16", "64", "65", "66")
TESSERA_WGMMA_RS(128, 1, __half, "f16", "{%64, %65, %66, %67}", "68", "69")

// The swapped products of 16- and 32-row query tiles: S^T = K Q^T (A = K, K-major) and O^T += V^T P^T (A = V^T,
// MN-major), B (Q or P^T) K-major in both.
TESSERA_WGMMA_SS(16, 0, 0, __nv_bfloat16, "bf16", "8", "9", "10")
TESSERA_WGMMA_SS(16, 1, 0, __nv_bfloat16, "bf16", "8", "9", "10")
TESSERA_WGMMA_SS(32, 0, 0, __nv_bfloat16, "bf16", "16", "17", "18")
TESSERA_WGMMA_SS(32, 1, 0, __nv_bfloat16, "bf16", "16", "17", "18")
TESSERA_WGMMA_SS(16, 0, 0, __half, "f16", "8", "9", "10")
TESSERA_WGMMA_SS(16, 1, 0, __half, "f16", "8", "9", "10")
TESSERA_WGMMA_SS(32, 0, 0, __half, "f16", "16", "17", "18")
TESSERA_WGMMA_SS(32, 1, 0, __half, "f16", "16", "17", "18")

#undef TESSERA_WGMMA_SS
#undef TESSERA_WGMMA_RS

}  // namespace tessera::ptx
