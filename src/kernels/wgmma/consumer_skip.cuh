#pragma once
// The consumer of Coarsened-Q tiles with two consumer warpgroups (Cfg::kConsumers = 2, T_KV = 64, span-masked or
// packed entries, B_Q < T_Q): a warpgroup skips the products of an entry none of whose active pairs meets its 64
// rows, waiting for and releasing its K and V stages instead. The other warpgroup's query blocks needed that K/V
// tile; this one would only have masked it whole. Two query blocks that share part of their kv lists thus load the
// shared tiles once and each compute only their own entries. The result is the one of consumer.cuh's loop, up to
// rounding: this loop rescales O on every tile, the straight-line loop only where a row maximum grows by more than
// kRescaleThreshold (config.cuh, kConditionalRescale).
//
// The tile steps are those of consumer.cuh's loop, as member functions of SkipConsumer so that the loop can start
// over after a skip; consumer.cuh keeps its own straight-line loop because ptxas spills in it when it is written with
// these steps (8-28 bytes in the packed t64x128.s1 and t128x128 kernels, session 13).
#include <cstdint>

#include "kernels/wgmma/consumer.cuh"

namespace tessera::kernels::wgmma {

/// A skipping consumer warpgroup's registers and ring positions over one work item, and the steps of its mainloop.
template <class Cfg, KvVariant V>
struct SkipConsumer {
  static_assert(Cfg::kVStages == Cfg::S, "the lookahead's deadlock argument assumes rings of equal depth");
  using T = typename Cfg::Elem;
  float o[Cfg::D / 2];
  std::uint32_t pf[Cfg::TKV / 16][4];  // P of the last tile computed, whose PV product is pending
  RowState st;
  TileMask<Cfg, V> mask;
  PipelineState<Cfg::S> kr, vr;  // next K to read; V of the pending PV product (or the next V)
  std::uint32_t base, q_rows;
  float scale_log2;
  std::uint32_t qf[Cfg::kQInRegisters ? Cfg::D / 16 : 1][4];  // Q's A fragments (kQInRegisters)

  /// Issues S = Q K^T on K stage kr.
  __device__ __forceinline__ void issue_qk(float (&s)[Cfg::TKV / 2]) {
    wgmma::issue_qk<Cfg>(s, qf, q_rows, base + Cfg::kKOffset + kr.stage * Cfg::kKvBytes);
  }

  /// S(e) = Q K(e)^T with nothing to overlap (the item's first tile, or the first after a skip): softmax, O *= alpha
  /// (O may hold earlier tiles after a skip; on the item's first tile O is 0 and alpha 0), P(e) packed.
  __device__ __forceinline__ void first_tile(const TileMembers& tm, const Barriers<Cfg>& bar, int lane) {
    float s[Cfg::TKV / 2];
    consumer_wait(bar.k_full, kr.stage, kr.phase);
    fence_all(o);
    issue_qk(s);
    ptx::wgmma_commit();
    ptx::wgmma_wait<0>();
    fence_all(s);
    consumer_release(bar.k_empty, kr.stage);
    kr.advance();
    mask.apply(s, tm, lane);
    float alpha[2];
    softmax_scores<Cfg::TKV, false>(s, st, scale_log2, alpha);  // exact maxima: always rescale (config.cuh)
    rescale_o<Cfg::D>(o, alpha);
    pack_p<Cfg::TKV, T>(s, pf);
  }

  /// S(e) issued together with the pending O += P V(e-1); the softmax of tile e runs while PV retires.
  __device__ __forceinline__ void overlapped_tile(const TileMembers& tm, const Barriers<Cfg>& bar, int lane) {
    float s[Cfg::TKV / 2];
    consumer_wait(bar.k_full, kr.stage, kr.phase);
    fence_all(o);
    issue_qk(s);
    ptx::wgmma_commit();
    consumer_wait(bar.v_full, vr.stage, vr.phase);
    pv_gemm<Cfg>(o, pf, base + Cfg::kVOffset + vr.stage * Cfg::kKvBytes);
    ptx::wgmma_commit();
    ptx::wgmma_wait<1>();  // S(e) retired; PV(e-1) may still run
    fence_all(s);
    consumer_release(bar.k_empty, kr.stage);
    kr.advance();
    mask.apply(s, tm, lane);
    float alpha[2];
    softmax_scores<Cfg::TKV, false>(s, st, scale_log2, alpha);
    ptx::wgmma_wait<0>();  // PV(e-1) retired
    fence_all(o);
    consumer_release(bar.v_empty, vr.stage);
    vr.advance();
    rescale_o<Cfg::D>(o, alpha);
    pack_p<Cfg::TKV, T>(s, pf);
  }

  /// The pending O += P V, alone.
  __device__ __forceinline__ void finish_pv(const Barriers<Cfg>& bar) {
    consumer_wait(bar.v_full, vr.stage, vr.phase);
    fence_all(o);
    pv_gemm<Cfg>(o, pf, base + Cfg::kVOffset + vr.stage * Cfg::kKvBytes);
    ptx::wgmma_commit();
    ptx::wgmma_wait<0>();
    fence_all(o);
    consumer_release(bar.v_empty, vr.stage);
    vr.advance();
  }

  /// An entry none of whose active pairs meets this warpgroup's rows: its K (skip_k) and V (skip_v) stages are
  /// waited for (every use of a stage is, so that the parity of each wait names the right phase) and released unread.
  __device__ __forceinline__ void skip_k(const Barriers<Cfg>& bar) {
    consumer_wait(bar.k_full, kr.stage, kr.phase);
    consumer_release(bar.k_empty, kr.stage);
    kr.advance();
  }
  __device__ __forceinline__ void skip_v(const Barriers<Cfg>& bar) {
    consumer_wait(bar.v_full, vr.stage, vr.phase);
    consumer_release(bar.v_empty, vr.stage);
    vr.advance();
  }
};

/// Whether a kernel has the skipping consumer: tiles of two consumer warpgroups whose entries carry membership bits
/// (span-masked and packed) and T_KV = 64; attention.cuh runs it for Coarsened-Q plans (B_Q < T_Q), where entries can
/// be foreign. Not on T_KV = 128: measured no gain there (q128c2.kv128p2: +1 % on band + random masks, -9 % on top-k,
/// session 13) and the second loop costs the packed t128x128 kernel a 16-byte spill.
template <class Cfg, KvVariant V>
inline constexpr bool kSkipForeignEntries = Cfg::kConsumers > 1 && V != KvVariant::kSpan && Cfg::TKV == 64;

/// The skipping consumer warpgroup `wg`'s whole work for `item`, epilogue included (ring positions `pos` and kPersist
/// as consumer_loop's). The warpgroup looks ahead for
/// the next entry m it computes; the entries before m it skips. While the PV of its previous tile p is pending it
/// holds V(p), and the producer may load entry e's K only once V(e - 1 - S) is released, so:
///   m - p <= S: skip the K of the entries between, S(m) overlapped with PV(p) as usual, then skip their V;
///   m - p >  S: finish PV(p) first (nothing held), skip the entries between, start again with first_tile(m).
/// Either way a warpgroup waits only for loads that need releases it has already given, or that the other
/// warpgroup, then behind it, can give without waiting for this one.
template <class Cfg, KvVariant V, bool kPersist>
__device__ __forceinline__ void consumer_skip_loop(const KernelParams& kp, const ItemRef<kPersist>& item,
                                                   unsigned char* smem, const Barriers<Cfg>& bar, int wg,
                                                   RingPositions<Cfg::S>& pos) {
  static_assert(Cfg::kQInRegisters, "Q is released after loading its fragments");
  const AttentionParams& p = kp.p;
  const WorkItem it = item.get(p);
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  const int row0 = wg * 64 + warp * 16 + lane / 4;  // tile row of the thread's first row
  // Entry count as a warp-uniform value (a shuffle from lane 0), so that the loop is not a divergent path.
  const int n = __shfl_sync(0xffffffffu, it.entry_end - it.entry_begin, 0);
  SkipConsumer<Cfg, V> cs;
  cs.base = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  cs.q_rows = cs.base + Cfg::kQOffset + wg * 64 * Cfg::kRowBytes;
  cs.scale_log2 = p.scale * 1.4426950408889634f;
#pragma unroll
  for (int i = 0; i < Cfg::D / 2; ++i) cs.o[i] = 0.f;
  cs.mask.init(p, row0, wg);
  cs.kr = cs.vr = pos.ring();

  if (n > 0) {
    consumer_wait(bar.q_full, 0, pos.q_phase());
    load_q_fragments<Cfg>(cs.qf, cs.q_rows, warp, lane);
    if constexpr (kPersist) release_q_after_ldmatrix(bar.q_empty);
    bool pending = false;  // the PV of the previous computed entry (p = j - 1) is not issued yet
    int j = 0;             // the next entry to look at; every K and V before it is released, V(p) excepted
    TileMembers tm = load_members<Cfg, V>(p, it.entry_begin);  // entry j's, loaded one tile ahead
    while (j < n) {
      int m = j;
      while (__all_sync(0xffffffffu, !cs.mask.touches(tm))) {  // the same for the whole warpgroup
        if (++m == n) break;
        tm = load_members<Cfg, V>(p, it.entry_begin + m);
      }
      if (m == n) break;
      const TileMembers cur = tm;
      // The next entry's bits, before this tile's products: their load latency then hides behind the tile (the
      // decision to skip gates the next S product).
      tm = load_members<Cfg, V>(p, it.entry_begin + min(m + 1, n - 1));
      if (pending && m - j >= Cfg::S) {  // m - p > S
        cs.finish_pv(bar);
        pending = false;
      }
      if (pending) {
        for (int e = j; e < m; ++e) cs.skip_k(bar);
        cs.overlapped_tile(cur, bar, lane);
        for (int e = j; e < m; ++e) cs.skip_v(bar);
      } else {
        for (int e = j; e < m; ++e) cs.skip_k(bar), cs.skip_v(bar);
        cs.first_tile(cur, bar, lane);
      }
      pending = true;
      j = m + 1;
    }
    if (pending) cs.finish_pv(bar);
    for (int e = j; e < n; ++e) cs.skip_k(bar), cs.skip_v(bar);
  } else if constexpr (kPersist) {
    release_q(bar.q_empty);  // an empty item: the producer loaded no Q
  }
  pos.advance(n);
  write_rows<Cfg>(p, item.get(p), cs.o, cs.st, row0, lane);
}

}  // namespace tessera::kernels::wgmma
