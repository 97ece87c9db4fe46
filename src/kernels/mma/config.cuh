#pragma once
// Compile-time configuration of one mma.sync attention kernel (one catalog entry).
//
// Warp layout. The W warps of a CTA form a WQ x WKV grid: WQ = min(W, T_Q / 16) warps split the query rows
// (each owns MT slabs of 16 rows), WKV = W / WQ warps split the kv columns of every tile (each owns T_KV / WKV
// columns). With WKV > 1 (small T_Q, e.g. t16x64.w4) each warp keeps its own online-softmax state over its
// column slice for the whole work item; the WKV states are merged through shared memory in the epilogue
// (an intra-CTA split-KV), so one K/V tile buffer feeds all warps.
//
// Pipeline. Tiles of T_Q < 64 rows (and S == 1) use FA2's schedule: S K buffers, one V buffer; in iteration j
// the CTA waits for K(j), issues V(j) (and K(j+S-1) when S >= 2), computes S = QK^T and the softmax while V(j)
// lands, waits for V(j), issues K(j+1) (S == 1) and computes PV. Shared memory: Q + S K tiles + 1 V tile.
// Tiles of T_Q >= 64 with S >= 2 keep S buffers of K and V each, loaded together S - 1 tiles ahead (the first
// version's schedule; FA2's schedule measured 4-9% slower on these register-bound tiles, bench/NOTES.md).
#include <cstddef>

namespace tessera::kernels::mma {

/// T: __nv_bfloat16 or __half. D: head_dim. TQ x TKV: physical tile. W: warps. S: K buffers (1..3).
template <class T, int D_, int TQ_, int TKV_, int W_, int S_>
struct Config {
  using Elem = T;
  static constexpr int D = D_, TQ = TQ_, TKV = TKV_, W = W_, S = S_;
  static constexpr int kThreads = W * 32;
  static constexpr int WQ = (TQ / 16 < W) ? TQ / 16 : W;  // warps along the query rows
  static constexpr int WKV = W / WQ;                      // warps splitting each kv tile
  static constexpr int kRowsPerWarp = TQ / WQ;
  static constexpr int kColsPerWarp = TKV / WKV;
  static constexpr int MT = kRowsPerWarp / 16;  // m16 row slabs per warp
  static constexpr int NT = kColsPerWarp / 8;   // n8 tiles of the warp's score slice
  static constexpr int kTileN8 = TKV / 8;       // n8 tiles of the whole score tile
  static constexpr int DT = D / 8;              // n8 tiles of the output
  static constexpr int kChunks = D / 8;         // 16-byte chunks per row
  static constexpr int kMaxSlots = 8;           // packed KV slots (c_kv <= 8)
  static constexpr std::size_t kQBytes = std::size_t(TQ) * D * 2;
  static constexpr std::size_t kKvBytes = std::size_t(TKV) * D * 2;
  static constexpr int kVBuffers = (S >= 2 && TQ >= 64) ? S : 1;  // V buffers (1: FA2's schedule)
  // Main loop: Q | K[S] | V[kVBuffers] | per-K-buffer slot blocks (int[S][8]) | slot counts (int[S][8])
  static constexpr std::size_t kLoopSmem =
      kQBytes + (S + kVBuffers) * kKvBytes + 2 * S * kMaxSlots * sizeof(int);
  // Epilogue merge of the WKV warp states (WKV > 1): O fp32 [WKV][TQ][D + 8] | m [WKV][TQ] | l [WKV][TQ]
  static constexpr int kMergeStride = D + 8;
  static constexpr std::size_t kMergeSmem =
      WKV > 1 ? std::size_t(WKV) * TQ * kMergeStride * 4 + 2 * std::size_t(WKV) * TQ * 4 : 0;
  static constexpr std::size_t kSmemBytes = kLoopSmem > kMergeSmem ? kLoopSmem : kMergeSmem;
  // One CTA per work item, whatever the plan's organisation (persistent CTAs: the wgmma family only).
  static constexpr bool kPersistent = false;
  // Resident CTAs per SM asked of ptxas (__launch_bounds__): CTAs whose warps hold one slab and a score slice
  // of at most 32 columns (or 64 columns with 8 warps) are held to 128 registers per thread, so that 16 warps
  // fit an SM; everything else gets the full register file.
  static constexpr int kMinBlocks = (MT == 1 && (NT <= 4 || (W == 8 && NT <= 8))) ? 65536 / (kThreads * 128) : 1;
  static_assert(D == 64 || D == 128, "head_dim 64 or 128");
  static_assert(TQ % 16 == 0 && W % WQ == 0 && TQ % (16 * WQ) == 0 && MT >= 1 && MT <= 4,
                "each query warp owns 1-4 slabs of 16 rows");
  static_assert(TKV % 16 == 0 && TKV >= 16 && TKV <= 128, "T_KV in 16..128, multiple of 16");
  static_assert(TKV % WKV == 0 && kColsPerWarp % 16 == 0, "each kv warp owns a multiple of 16 columns");
  static_assert(S >= 1 && S <= 3, "1-3 K buffers");
};

}  // namespace tessera::kernels::mma
