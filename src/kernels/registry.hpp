#pragma once
// Internal: the generated table of compiled catalog entries (build/<preset>/src/kernels/generated/registry.cu,
// written by src/kernels/CMakeLists.txt from catalog.def). A plain array of extern functions: no static
// initialization order to worry about.
#include <cstddef>

#include "kernels/launch.hpp"

namespace tessera::kernels {

using EntryLaunchFn = void (*)(KvVariant, const AttentionParams&, Stream);

struct RegistryRow {
  const char* name;  ///< nullptr marks the sentinel row
  DType dtype;
  int head_dim, tile_q, tile_kv, warps, stages;
  std::size_t smem_bytes;
  bool persistent_ctas;
  EntryLaunchFn launch;
};

/// Rows of every compiled entry followed by one sentinel row (name == nullptr).
extern const RegistryRow kRegistry[];

}  // namespace tessera::kernels
