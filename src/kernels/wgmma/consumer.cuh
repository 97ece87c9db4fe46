#pragma once
// The consumer role: warpgroup c (0 .. kConsumers-1) owns query rows 64 c .. 64 c + 63 of the tile. Per entry j of
// the work item (FlashAttention-3's intra-warpgroup overlap):
//
//   wait K(j); issue S(j) = Q K(j)^T (SS; RS with Q's fragments in registers on T_KV = 64 tiles) | commit
//   j > 0: wait V(j-1); issue O += P(j-1) V(j-1) (RS)   | commit
//   wait until S(j) retired (PV(j-1) may still run); release K(j)
//   mask S(j); softmax score step (new maxima, P(j) = exp2(...), alpha)
//   j > 0: wait until PV(j-1) retired; release V(j-1)
//   O *= alpha (only on tiles where a row maximum moved: softmax.cuh); pack P(j) into A fragments
//
// and after the last entry O += P(n-1) V(n-1). The softmax of tile j thus overlaps the PV product of tile j-1.
// In a persistent CTA the Q buffer is released as soon as the item no longer reads it (after loading Q's fragments
// when Q sits in registers, else once the last S retired), so that the producer can load the next item's Q.
// Coarsened-Q tiles of two consumer warpgroups on T_KV = 64 run consumer_skip.cuh's loop instead, which skips the
// entries that only the other warpgroup's query blocks need (attention.cuh chooses).
// Deadlock freedom (any stage counts: S for K, Config::kVStages for V): the producer issues K(0), V(0), K(1), V(1),
// ... in order and waits only for stages the consumers release after reading them; the consumers wait for K(j)
// before V(j-1), both issued earlier, so every wait is for a load already issued or issuable.
#include <cstdint>

#include "kernels/output.cuh"
#include "kernels/ptx/ldmatrix.cuh"
#include "kernels/ptx/proxy_fence.cuh"
#include "kernels/ptx/wgmma.cuh"
#include "kernels/wgmma/masking.cuh"
#include "kernels/wgmma/params.cuh"
#include "kernels/wgmma/pipeline.cuh"
#include "kernels/wgmma/scheduler.cuh"
#include "kernels/wgmma/softmax.cuh"

namespace tessera::kernels::wgmma {

/// Descriptor strides of the 128-byte-swizzled operands (ptx/wgmma.cuh): K-major (Q, K) and MN-major (V).
inline constexpr std::uint32_t kAtomBytes = 1024;  // 8 rows x 128 bytes

/// S = Q K^T over the head dimension: D / 16 wgmma k steps (32 bytes each inside a 128-byte panel row).
template <class Cfg>
__device__ __forceinline__ void qk_gemm(float (&s)[Cfg::TKV / 2], std::uint32_t q_rows, std::uint32_t k_stage) {
  using T = typename Cfg::Elem;
  ptx::wgmma_fence();  // as every batch: orders earlier register writes before the wgmma access them
#pragma unroll
  for (int kk = 0; kk < Cfg::D / 16; ++kk) {
    const std::uint32_t off = (kk % 4) * 32;  // k step inside the 128-byte row of panel kk / 4
    const std::uint64_t da = ptx::make_smem_desc(q_rows + (kk / 4) * Cfg::kQPanelBytes + off, 16, kAtomBytes);
    const std::uint64_t db = ptx::make_smem_desc(k_stage + (kk / 4) * Cfg::kKvPanelBytes + off, 16, kAtomBytes);
    ptx::wgmma_ss<Cfg::TKV, 0, T>(s, da, db, kk > 0);
  }
}

/// Q's A fragments of S = Q K^T (wgmma RS) for the warpgroup's 64 rows at q_rows, read by ldmatrix from the 128-byte
/// swizzled panels (16-byte chunk c of row r sits at chunk c ^ (r % 8)): per k step of 16 columns, matrices (rows 0-7,
/// k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15) of the warp's 16 rows: the mma.sync A layout
/// that wgmma RS reads (the same as pack_p's P).
template <class Cfg>
__device__ __forceinline__ void load_q_fragments(std::uint32_t (&qf)[Cfg::D / 16][4], std::uint32_t q_rows, int warp,
                                                 int lane) {
  const int mi = lane / 8, r8 = lane % 8;
  const int row = warp * 16 + (mi % 2) * 8 + r8;  // row & 7 == r8: the warpgroup's rows start on a swizzle atom
#pragma unroll
  for (int kk = 0; kk < Cfg::D / 16; ++kk) {
    const int chunk = 2 * (kk % 4) + mi / 2;
    ptx::ldmatrix_x4(qf[kk], q_rows + (kk / 4) * Cfg::kQPanelBytes + row * Cfg::kRowBytes + ((chunk ^ r8) * 16));
  }
}

/// S = Q K^T with Q from registers (Config::kQInRegisters): only K is read from shared memory.
template <class Cfg>
__device__ __forceinline__ void qk_gemm_rs(float (&s)[Cfg::TKV / 2], const std::uint32_t (&qf)[Cfg::D / 16][4],
                                           std::uint32_t k_stage) {
  using T = typename Cfg::Elem;
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < Cfg::D / 16; ++kk) {
    const std::uint32_t off = (kk % 4) * 32;
    const std::uint64_t db = ptx::make_smem_desc(k_stage + (kk / 4) * Cfg::kKvPanelBytes + off, 16, kAtomBytes);
    ptx::wgmma_rs<Cfg::TKV, 0, T>(s, qf[kk], db, kk > 0);
  }
}

/// S = Q K^T on the K stage at k_stage: RS from Q's fragments qf where Config::kQInRegisters, else SS from the Q
/// panels at q_rows.
template <class Cfg>
__device__ __forceinline__ void issue_qk(float (&s)[Cfg::TKV / 2],
                                         const std::uint32_t (&qf)[Cfg::kQInRegisters ? Cfg::D / 16 : 1][4],
                                         std::uint32_t q_rows, std::uint32_t k_stage) {
  if constexpr (Cfg::kQInRegisters) qk_gemm_rs<Cfg>(s, qf, k_stage);
  else qk_gemm<Cfg>(s, q_rows, k_stage);
}

/// O += P V over the tile's kv rows: T_KV / 16 wgmma k steps of 16 rows (2048 bytes) each; V is MN-major, its
/// 64-column panels kKvPanelBytes apart.
template <class Cfg>
__device__ __forceinline__ void pv_gemm(float (&o)[Cfg::D / 2], const std::uint32_t (&pf)[Cfg::TKV / 16][4],
                                        std::uint32_t v_stage) {
  using T = typename Cfg::Elem;
  ptx::wgmma_fence();  // O was rescaled and P packed by ordinary instructions
#pragma unroll
  for (int kk = 0; kk < Cfg::TKV / 16; ++kk) {
    const std::uint64_t db =
        ptx::make_smem_desc(v_stage + kk * 16 * Cfg::kRowBytes, Cfg::kKvPanelBytes, kAtomBytes);
    ptx::wgmma_rs<Cfg::D, 1, T>(o, pf[kk], db, true);
  }
}

template <int N>
__device__ __forceinline__ void fence_all(float (&x)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) ptx::fence_operand(x[i]);
}

/// Epilogue of a consumer warpgroup: normalizes O by the row sums and writes the thread's two rows (rows past q_len
/// belong to no query of the item) and their LSE (natural log; -inf for an empty row, whose O is 0).
template <class Cfg>
__device__ __forceinline__ void write_rows(const AttentionParams& p, const WorkItem& it, const float (&o)[Cfg::D / 2],
                                           const RowState& st, int row0, int lane) {
  const int t2 = 2 * (lane & 3);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = st.l[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int r = row0 + 8 * h;
    if (r >= it.q_len) continue;
    const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
    for (int i = 0; i < Cfg::D / 8; ++i)
      store_pair<Cfg>(p, it, r, 8 * i + t2, o[4 * i + 2 * h] * inv, o[4 * i + 2 * h + 1] * inv);
    if ((lane & 3) == 0)
      store_lse<Cfg>(p, it, r, l > 0.f ? (st.m[h] + __log2f(l)) * 0.6931471805599453f : -INFINITY);
  }
}

/// Consumer side, persistent CTAs: once this thread no longer reads the Q buffer or the previous item's slot of the
/// item ring, releases them. Every consumer thread arrives (Barriers::init counts kConsumers x 128 arrivals on
/// q_empty), so that each thread's own reads are ordered before its own arrival (release semantics) and the
/// producer's wait (acquire) before its next write. Session 15 released by lane 0 of each converged warp, with and
/// without a CTA fence: correct under the PTX memory model, but racecheck reported the other lanes' ring reads
/// against the producer's next write on the T_KV = 128 tiles (bench/NOTES.md, sessions 15 and 16). 128 arrivals per
/// warpgroup and item cost nothing measurable next to an item's tiles.
__device__ __forceinline__ void release_q(std::uint64_t* q_empty) { ptx::mbarrier_arrive(q_empty); }

/// release_q after the thread read Q by ldmatrix (Config::kQInRegisters): the producer's next TMA write of Q is an
/// async-proxy access after generic-proxy reads, so the proxy fence orders them first.
__device__ __forceinline__ void release_q_after_ldmatrix(std::uint64_t* q_empty) {
  ptx::fence_proxy_async_shared();
  release_q(q_empty);
}

/// Span tiles (KvVariant::kSpan) need one metadata load per entry, its kv tile for the ragged-tail test (none at all
/// when N_kv is a multiple of T_KV): early_members issues it before the K wait, so that its latency hides behind S
/// rather than sitting between S and the softmax. The other variants load their members after S retires (apply_mask):
/// their membership words and packed slot ids, live across the wgmma, cost registers and spilled (session 13).
template <class Cfg, KvVariant V>
__device__ __forceinline__ TileMembers early_members(const AttentionParams& p, std::int64_t e) {
  if constexpr (V == KvVariant::kSpan) return load_members<Cfg, V>(p, e);
  else return TileMembers{~0ull, -1, 0};
}

template <KvVariant V, class Mask, int N>
__device__ __forceinline__ void apply_mask(const Mask& mask, float (&s)[N], const TileMembers& early,
                                           const AttentionParams& p, std::int64_t e, int lane) {
  if constexpr (V == KvVariant::kSpan) mask.apply(s, early, lane);
  else mask.apply(s, p, e, lane);
}

/// The consumer warpgroup `wg`'s whole work for `item`, epilogue included: every entry computed in order (tile 0
/// alone, each later tile overlapped with the previous PV, then the last PV), from ring positions `pos` (advanced
/// past the item). kPersist: the CTA is persistent (its producer announced the item; the Q buffer is released).
template <class Cfg, KvVariant V, bool kPersist>
__device__ __forceinline__ void consumer_loop(const KernelParams& kp, const ItemRef<kPersist>& item,
                                              unsigned char* smem, const Barriers<Cfg>& bar, int wg,
                                              RingPositions<Cfg::S>& pos) {
  using T = typename Cfg::Elem;
  const AttentionParams& p = kp.p;
  const WorkItem it = item.get(p);
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  const int row0 = wg * 64 + warp * 16 + lane / 4;  // tile row of the thread's first row
  // Entry count as a warp-uniform value (a shuffle from lane 0), so that the loop is not a divergent path.
  const int n = __shfl_sync(0xffffffffu, it.entry_end - it.entry_begin, 0);
  const std::uint32_t base = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  const std::uint32_t q_rows = base + Cfg::kQOffset + wg * 64 * Cfg::kRowBytes;
  const float scale_log2 = p.scale * 1.4426950408889634f;

  float o[Cfg::D / 2];
#pragma unroll
  for (int i = 0; i < Cfg::D / 2; ++i) o[i] = 0.f;
  std::uint32_t pf[Cfg::TKV / 16][4];
  RowState st;
  TileMask<Cfg, V> mask;
  mask.init(p, row0, wg);
  PipelineState<Cfg::S> kr = pos.ring();                                // K(j) read position
  PipelineState<Cfg::kVStages> vr = pos.template ring<Cfg::kVStages>();  // V(j-1) read position
  std::uint32_t qf[Cfg::kQInRegisters ? Cfg::D / 16 : 1][4];  // Q's A fragments (kQInRegisters)

  if (n > 0) {
    consumer_wait(bar.q_full, 0, pos.q_phase());
    if constexpr (Cfg::kQInRegisters) {
      load_q_fragments<Cfg>(qf, q_rows, warp, lane);
      if constexpr (kPersist) release_q_after_ldmatrix(bar.q_empty);
    }
    // Tile 0: S(0), softmax; nothing to overlap with yet.
    {
      float s[Cfg::TKV / 2];
      const TileMembers tm = early_members<Cfg, V>(p, it.entry_begin);
      consumer_wait(bar.k_full, kr.stage, kr.phase);
      issue_qk<Cfg>(s, qf, q_rows, base + Cfg::kKOffset + kr.stage * Cfg::kKvBytes);
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
      fence_all(s);
      consumer_release(bar.k_empty, kr.stage);
      kr.advance();
      if constexpr (kPersist && !Cfg::kQInRegisters)
        if (n == 1) release_q(bar.q_empty);
      apply_mask<V>(mask, s, tm, p, it.entry_begin, lane);
      float alpha[2];
      softmax_scores<Cfg::TKV, Cfg::kConditionalRescale>(s, st, scale_log2, alpha);  // O is still 0: no rescale
      pack_p<Cfg::TKV, T>(s, pf);
    }
    for (int j = 1; j < n; ++j) {
      float s[Cfg::TKV / 2];
      const TileMembers tm = early_members<Cfg, V>(p, it.entry_begin + j);
      consumer_wait(bar.k_full, kr.stage, kr.phase);
      fence_all(o);
      issue_qk<Cfg>(s, qf, q_rows, base + Cfg::kKOffset + kr.stage * Cfg::kKvBytes);
      ptx::wgmma_commit();
      consumer_wait(bar.v_full, vr.stage, vr.phase);
      pv_gemm<Cfg>(o, pf, base + Cfg::kVOffset + vr.stage * Cfg::kKvBytes);
      ptx::wgmma_commit();
      ptx::wgmma_wait<1>();  // S(j) retired; PV(j-1) may still run
      fence_all(s);
      consumer_release(bar.k_empty, kr.stage);
      kr.advance();
      if constexpr (kPersist && !Cfg::kQInRegisters)
        if (j == n - 1) release_q(bar.q_empty);
      apply_mask<V>(mask, s, tm, p, it.entry_begin + j, lane);
      float alpha[2];
      const bool rescale = softmax_scores<Cfg::TKV, Cfg::kConditionalRescale>(s, st, scale_log2, alpha);
      ptx::wgmma_wait<0>();  // PV(j-1) retired
      fence_all(o);
      consumer_release(bar.v_empty, vr.stage);
      vr.advance();
      if (rescale) rescale_o<Cfg::D>(o, alpha);
      pack_p<Cfg::TKV, T>(s, pf);
    }
    consumer_wait(bar.v_full, vr.stage, vr.phase);
    fence_all(o);
    pv_gemm<Cfg>(o, pf, base + Cfg::kVOffset + vr.stage * Cfg::kKvBytes);
    ptx::wgmma_commit();
    ptx::wgmma_wait<0>();
    fence_all(o);
    consumer_release(bar.v_empty, vr.stage);
  } else if constexpr (kPersist) {
    release_q(bar.q_empty);  // an empty item: the producer loaded no Q
  }
  pos.advance(n);
  write_rows<Cfg>(p, item.get(p), o, st, row0, lane);
}

}  // namespace tessera::kernels::wgmma
