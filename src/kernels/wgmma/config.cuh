#pragma once
// Compile-time configuration of one wgmma attention kernel (one Wgmma catalog entry). Plain C++ (no CUDA headers):
// src/core/catalog.cpp computes each entry's shared memory from the same struct.
//
// Roles (FlashAttention-3's warp specialization): warpgroup 0 is the producer (one elected thread of its first
// warp issues every TMA load, its whole first warp for packed tiles of one item; the warpgroup lowers its registers
// to kProducerRegs), warpgroups 1..kConsumers each
// own 64 query rows of the T_Q-row tile and run S = Q K^T (wgmma SS, or RS with Q in registers: kQInRegisters),
// the online softmax and O += P V (wgmma RS, P from registers) with kConsumerRegs registers.
// W = 4 * (1 + T_Q / 64) warps.
//
// Shared memory (every operand 128-byte swizzled in 64-column panels of 128-byte rows, as TMA writes it):
//   Q [kPanels][T_Q][64] | K [S][kPanels][T_KV][64] | V [kVStages][kPanels][T_KV][64] | (swapped: P^T, maxima)
// from a 1024-byte-aligned base, then the mbarriers and the item ring [2] (kSmallBytes); on the s1 tile
// (kSmallInGap) those go into the alignment gap below that base when the gap holds them (pipeline.cuh, SmemLayout).
// Separate K and V rings, so S = Q K^T of tile j can start before V(j) has landed: S stages each, except that a
// one-stage plan (s1: one K buffer, no K prefetch) keeps a two-stage V ring (kVStages). With one V stage the
// producer, which issues K(0), V(0), K(1), V(1), ... in order, could issue V(j) only once PV(j-1) had retired, at the
// end of the consumers' tile j, and K(j+1) queued behind it; with two, V(j) is issued a tile earlier and K(j+1) as
// soon as S(j) has retired. The one-consumer T_KV = 128 tile still fits two CTAs per SM with it (112 KB of operands;
// session 20). (Not the swapped tiles, whose s2 entries are the only ones built; bench/next/wgmma_t32s1.patch keeps
// its one V stage.)
//
// Persistent CTAs (kPersistent; plans with persistent CTAs, `g1p`): the launcher starts as many CTAs as fit the GPU
// at once; CTA c runs item c first, then takes the next item of the launch's work list (longest first) from a global
// ticket counter (scheduler.cuh), so CTAs that finish early take more items. The producer announces each item to the
// consumers in the item ring (two slots, by item parity) with the Q buffer's full barrier, and loads the next item's
// Q and first K and V tiles while the consumers finish the current one (a q_empty barrier: every consumer thread has
// released the Q buffer). An item's start (launch, barrier set-up, the latency of its first loads) then no longer
// idles its SM.
//
// Swapped organisation (T_Q = 16 or 32, below wgmma's 64-row minimum; consumer_swap.cuh): one consumer warpgroup
// computes S^T = K Q^T with the T_KV = 64 kv rows as wgmma M and the query rows as N, and O^T += V^T P^T with P^T
// staged in shared memory, two buffers of T_Q rows x 64 kv (128 bytes, 128-byte swizzled), after the V ring; then the
// column maxima exchanged between the 4 warps ([4][T_Q] fp32). W = 8 (producer + one consumer warpgroup).
#include <cstddef>

namespace tessera::kernels::wgmma {

/// T: __nv_bfloat16 or __half (any 2-byte type for the host). D: head_dim. TQ x TKV: physical tile. W: warps
/// (producer warpgroup included). S: stages of the K ring and of the V ring (kVStages: 2 for an s1 tile).
template <class T, int D_, int TQ_, int TKV_, int W_, int S_>
struct Config {
  using Elem = T;
  static constexpr int D = D_, TQ = TQ_, TKV = TKV_, W = W_, S = S_;
  static constexpr bool kSwapAB = TQ < 64;  // the swapped organisation (see the header comment)
  static constexpr int kConsumers = kSwapAB ? 1 : TQ / 64;  // consumer warpgroups, 64 query rows each (or one)
  static constexpr int kThreads = W * 32;
  static constexpr int kPanels = D / 64;      // 64-element (128-byte) column panels per row
  static constexpr std::size_t kRowBytes = 128;
  static constexpr std::size_t kQPanelBytes = std::size_t(TQ) * kRowBytes;
  static constexpr std::size_t kKvPanelBytes = std::size_t(TKV) * kRowBytes;
  static constexpr std::size_t kQBytes = kQPanelBytes * kPanels;
  static constexpr std::size_t kKvBytes = kKvPanelBytes * kPanels;  // one K or V stage
  static constexpr std::size_t kQOffset = 0;
  static constexpr std::size_t kKOffset = kQOffset + kQBytes;
  static constexpr int kVStages = S == 1 && !kSwapAB ? 2 : S;  // stages of the V ring (see the header comment)
  static constexpr std::size_t kVOffset = kKOffset + S * kKvBytes;
  static constexpr std::size_t kPBytes = kSwapAB ? std::size_t(TQ) * kRowBytes : 0;  // one P^T buffer (swapped)
  static constexpr std::size_t kPOffset = kVOffset + kVStages * kKvBytes;             // two buffers
  static constexpr std::size_t kRedOffset = kPOffset + 2 * kPBytes;                   // [4 warps][T_Q] fp32
  static constexpr std::size_t kRedBytes = kSwapAB ? std::size_t(4) * TQ * 4 : 0;
  // Arrivals that release a stage: one per consumer warp (lane 0, after the warp's wgmma reads have retired).
  static constexpr int kConsumerWarps = 4 * kConsumers;
  // Persistent CTAs (see the header comment) on the 64- and 128-row tiles. Not the swapped tiles: their epilogue
  // stages O in the K and V rings, which the producer would by then be filling with the next item's tiles. Nor the
  // one-consumer T_KV = 128 tiles, whose consumers (O, S and P: 160 of their 200 registers) spilled in an item loop
  // (session 14). The host catalog copies it (CatalogEntry::persistent_ctas), so plans with persistent CTAs are
  // enumerated for these entries only.
  static constexpr bool kPersistent = !kSwapAB && !(kConsumers == 1 && TKV == 128);
  static constexpr std::size_t kOperandBytes = kRedOffset + kRedBytes;  // everything above the aligned base
  // sm_90a's shared memory per SM, and what the hardware reserves of it per resident CTA.
  static constexpr std::size_t kSmemPerSm = 228 * 1024, kReservedPerCta = 1024;
  // The small region: q_full, q_empty (kPersistent), k_full[S], k_empty[S], v_full[kVStages], v_empty[kVStages],
  // then the item ring, int32 [2] (kPersistent).
  static constexpr int kBarriers = (kPersistent ? 2 : 1) + 2 * S + 2 * kVStages;
  static constexpr std::size_t kItemBytes = kPersistent ? 8 : 0;
  static constexpr std::size_t kSmallBytes = kBarriers * 8 + kItemBytes;
  // The dynamic shared-memory window is only 16-byte aligned: the kernel rounds its base up to 1024 bytes (128-byte
  // swizzle atoms), a gap of 0 to 1008 bytes. The small region follows the operands, at a fixed offset from the
  // aligned base; only where that would cost the s1 tile its second CTA per SM (kSmallInGap: the operands,
  // 1008 and kSmallBytes over half an SM less the reservation, 115,712 bytes) does it go into the gap when it fits there (gap >= kSmallBytes), else
  // after the operands (then gap + kSmallBytes < 2 kSmallBytes <= 1008): 1008 bytes above the operands suffice.
  // (Not everywhere: the run-time choice of its address made the persistent packed 128-row kernels spill 12 bytes.)
  static constexpr std::size_t kAlignSlack = 1008;
  static constexpr bool kSmallInGap =
      S == 1 && kOperandBytes + kAlignSlack + kSmallBytes > kSmemPerSm / 2 - kReservedPerCta;
  static constexpr std::size_t kSmemBytes = kOperandBytes + kAlignSlack + (kSmallInGap ? 0 : kSmallBytes);
  static constexpr int kMaxSlots = 8;  // packed KV slots per tile (c_kv <= 8)
  // CTAs per SM asked of ptxas (__launch_bounds__): two for one-consumer tiles, one otherwise; three for a swapped
  // tile whose shared memory lets three be resident (228 KB per SM, 1 KB of it reserved per CTA). That caps the
  // registers at entry below what the consumers then raise themselves to (setmaxnreg.inc must not lower them); that
  // many CTAs are resident when their shared memory fits too.
  static constexpr int kMinBlocks =
      kConsumers == 1 ? (kSwapAB && 3 * (kSmemBytes + kReservedPerCta) <= kSmemPerSm ? 3 : 2) : 1;
  // Register split (setmaxnreg): the CTA's registers at entry are 64K / (kThreads * kMinBlocks) per thread, rounded
  // down to 8; the producer keeps kProducerRegs (enough for the next entry's slot rows, prefetched) and the
  // consumers take the rest: 40 / 232 with two consumer warpgroups, 56 / 200 with one (24 / 232 on the s1 tile, below),
  // 40 / 120 with three CTAs.
  static constexpr int kEntryRegs = (65536 / (kThreads * kMinBlocks)) / 8 * 8;
  // The preferred shared-memory carveout (entry_common.cuh, opt_in_smem_once): 100 % for the s1 tile, whose two CTAs
  // (2 x 116,720 bytes with the 1 KB reserved per CTA) fit only the largest carveout, so that the driver cannot pick
  // one that holds a single CTA; elsewhere -1, the driver's choice (as measured until session 20; the swapped t16x64
  // also needs the largest for its three CTAs, and has always run on the driver's choice).
  static constexpr int kCarveoutPercent =
      S == 1 && kMinBlocks * (kSmemBytes + kReservedPerCta) > 196 * 1024 ? 100 : -1;
  // The s1 tile (one K stage, two V stages, two CTAs per SM) keeps Q in registers (kQInRegisters), whose consumers
  // spill below 224 registers: its producer runs on 24, the fewest setmaxnreg allows (no spills; 0.3-1 % faster than
  // 32 on the H200, bench/NOTES.md session 23).
  static constexpr bool kS1Tile = S == 1 && TKV == 128 && kConsumers == 1 && !kSwapAB;
  static constexpr int kProducerRegs = kS1Tile ? 24 : kConsumers == 1 && kMinBlocks <= 2 ? 56 : 40;
  // Swapped organisation: named barriers of the consumer warpgroup (ids 1 and 2; 0 is __syncthreads), the head
  // dimension's 64-row wgmma M blocks of O^T, and the query columns a thread holds in the accumulators (2 per n8 tile).
  static constexpr int kMaxBarrier = 1, kPBarrier = 2;
  static constexpr int kMBlocks = D / 64;
  static constexpr int kCols = TQ / 4;
  // The epilogue stages O (fp32, rows padded to D + 4 floats against bank conflicts) in the K and V rings.
  static constexpr std::size_t kOStageBytes = std::size_t(TQ) * (D + 4) * 4;
  static constexpr int kConsumerRegsRaw = kEntryRegs + (kEntryRegs - kProducerRegs) / kConsumers;
  static constexpr int kConsumerRegs = (kConsumerRegsRaw > 240 ? 240 : kConsumerRegsRaw) / 8 * 8;
  // S = Q K^T with Q from registers (wgmma RS; loaded once per item by ldmatrix, D / 4 registers per thread) instead of
  // shared memory (SS): the product then reads only K from shared memory, half the bytes per FLOP when T_KV = 64
  // (consumer.cuh); on the s1 tile a third fewer (its shared memory also takes the TMA writes of ~8 TB/s of K and V
  // per GPU; +3 % on the H200, session 23). Off on the other T_KV = 128 tiles, where the registers are short (O, S and
  // P take 160 per thread before Q's 32; t128x128 with it: its persistent packed kernel spilled and lost 4-12 %,
  // session 23), and for the swapped tiles (Q is their B operand).
  static constexpr bool kQInRegisters = !kSwapAB && (TKV == 64 || kS1Tile);
  // Conditional rescaling of O (softmax.cuh, kRescaleThreshold) in the straight-line consumer (consumer.cuh): off on
  // the one-consumer T_KV = 128 tiles, whose packed kernel spilled 52 bytes with it (O, S and P already take 160 of
  // their 200 registers). The skipping consumer (consumer_skip.cuh) always rescales: with it, its Coarsened-Q tiles
  // lost 1.6-4.2 % on the H200 (bench/NOTES.md, session 17), where the straight-line tiles gained 2-10 %.
  static constexpr bool kConditionalRescale = !(kConsumers == 1 && TKV == 128);

  static_assert(D == 64 || D == 128, "head_dim 64 or 128");
  static_assert(TQ == 16 || TQ == 32 || TQ == 64 || TQ == 128,
                "T_Q = 64 x consumer warpgroups (1 or 2), or 16 / 32 (swapped)");
  static_assert(!kSwapAB || TKV == 64, "swapped tiles: T_KV = 64, the wgmma M of S^T = K Q^T");
  static_assert(!kSwapAB || kOStageBytes <= (S + kVStages) * kKvBytes, "the epilogue's O stage fits the K and V rings");
  static_assert(!kSmallInGap || 2 * kSmallBytes <= kAlignSlack, "the small region fits the alignment slack (SmemLayout)");
  static_assert(S > 1 || 2 * (kSmemBytes + kReservedPerCta) <= kSmemPerSm,
                "an s1 tile (two-stage V ring) keeps two CTAs per SM: 228 KB per SM, 1 KB reserved per CTA");
  static_assert(W == 4 * (1 + kConsumers), "W counts the producer warpgroup and the consumers' 4 warps each");
  static_assert(TKV == 64 || TKV == 128, "T_KV: a wgmma N the PTX layer provides (64 or 128)");
  static_assert(S >= 1 && S <= 4, "1-4 stages per ring");
  static_assert(kSmemBytes <= 227 * 1024, "fits sm_90a's 227 KB of shared memory per CTA");
  static_assert(kProducerRegs * 128 + kConsumerRegs * 128 * kConsumers <= kEntryRegs * kThreads,
                "the register split fits the CTA's registers");
};

}  // namespace tessera::kernels::wgmma
