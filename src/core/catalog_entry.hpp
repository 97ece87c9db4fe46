#pragma once
// A kernel catalog entry as the host sees it (one line of src/kernels/catalog.def).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tessera/dtype.hpp"

namespace tessera {

/// Kernel family of a catalog entry (DESIGN.md section 4).
enum class KernelFamily : std::uint8_t {
  kMma,    ///< mma.sync m16n8k16 + ldmatrix + cp.async; runs on sm_80, sm_86, sm_89, sm_90(a), sm_120
  kWgmma,  ///< wgmma + TMA, warp-specialized producer/consumer; sm_90a (H100/H200) only
};

/// One native kernel configuration. Tiles in tokens.
struct CatalogEntry {
  std::string_view name;  ///< canonical name, e.g. "mma.bf16.d128.t64x64.w4.s2"
  KernelFamily family;
  DType dtype;            ///< kBFloat16 or kFloat16
  int head_dim;           ///< D
  int tile_q;             ///< T_Q
  int tile_kv;            ///< T_KV
  int warps;              ///< warps per CTA
  int stages;             ///< K/V pipeline stages
  /// Dynamic shared memory per CTA in bytes: Config::kSmemBytes of src/kernels/mma/config.cuh or
  /// src/kernels/wgmma/config.cuh, the amount the launcher asks for.
  std::size_t smem_bytes = 0;
  /// Whether the kernel runs persistent CTAs for plans that ask for them (Plan::org.persistent, ids `g1p`): the
  /// Config::kPersistent of src/kernels/wgmma/config.cuh (the wgmma 64- and 128-row tiles but t64x128). Other
  /// entries run one CTA per work item of the list whatever the plan, so plans with persistent CTAs are enumerated
  /// for these entries only.
  bool persistent_ctas = false;
};

}  // namespace tessera
