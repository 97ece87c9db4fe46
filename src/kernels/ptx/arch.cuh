#pragma once
// Which instruction set the current device compilation pass targets. TESSERA_SM90A is 1 only in the sm_90a pass
// (wgmma, setmaxnreg; `-gencode=arch=compute_90a,code=sm_90a`), and TESSERA_SM90 in any pass for sm_90 or later
// (TMA, mbarrier transaction counts, elect.sync). Wrappers of those instructions compile to a trap in other passes,
// so a translation unit that holds Hopper kernels still builds for every architecture of the `full` preset;
// eligibility never sends such a kernel to another architecture (src/core/eligibility.cpp).
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TESSERA_SM90A 1
#else
#define TESSERA_SM90A 0
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TESSERA_SM90 1
#else
#define TESSERA_SM90 0
#endif
