#pragma once
// Compile-time configuration of one mma.sync attention kernel (one catalog entry).
#include <cstddef>

namespace tessera::kernels::mma {

/// T: __nv_bfloat16 or __half. D: head_dim. TQ x TKV: physical tile. W: warps. S: K/V pipeline stages.
template <class T, int D_, int TQ_, int TKV_, int W_, int S_>
struct Config {
  using Elem = T;
  static constexpr int D = D_, TQ = TQ_, TKV = TKV_, W = W_, S = S_;
  static constexpr int kThreads = W * 32;
  static constexpr int kRowsPerWarp = TQ / W;
  static constexpr int MT = kRowsPerWarp / 16;  // m16 row slabs per warp
  static constexpr int NT = TKV / 8;            // n8 tiles of the score tile
  static constexpr int DT = D / 8;              // n8 tiles of the output
  static constexpr int kChunks = D / 8;         // 16-byte chunks per row
  static constexpr int kMaxSlots = 8;           // packed KV slots (c_kv <= 8)
  static constexpr std::size_t kQBytes = std::size_t(TQ) * D * 2;
  static constexpr std::size_t kKvBytes = std::size_t(TKV) * D * 2;
  // Q | K[S] | V[S] | per-stage slot blocks (int[S][8]) | per-stage slot counts (int[S][8])
  static constexpr std::size_t kSmemBytes = kQBytes + 2 * S * kKvBytes + 2 * S * kMaxSlots * sizeof(int);
  static_assert(D == 64 || D == 128, "head_dim 64 or 128");
  static_assert(TQ % (16 * W) == 0 && MT >= 1 && MT <= 4, "each warp owns 1-4 slabs of 16 query rows");
  static_assert(TKV % 16 == 0 && TKV >= 16 && TKV <= 128, "T_KV in 16..128, multiple of 16");
  static_assert(S >= 2 && S <= 4, "2-4 pipeline stages");
};

}  // namespace tessera::kernels::mma
