#pragma once
// The kernel parameter block of the wgmma family: the family-independent AttentionParams plus the TMA tensor maps
// the launcher encodes per launch (passed as one __grid_constant__ parameter, so the maps stay in parameter space,
// where TMA reads them).
#include <cuda.h>

#include "kernels/launch.hpp"

namespace tessera::kernels::wgmma {

struct KernelParams {
  CUtensorMap q;  ///< Q [B, N_q, H_q, D], boxes of 64 x T_Q rows
  CUtensorMap k;  ///< K [B, N_kv, H_kv, D], boxes of 64 x T_KV rows (span) or 64 x B_KV rows (packed slots)
  CUtensorMap v;  ///< V, as K
  AttentionParams p;
};

}  // namespace tessera::kernels::wgmma
