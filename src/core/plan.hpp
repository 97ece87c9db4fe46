#pragma once
// The physical plan P = <g_Q, g_KV, sigma, e> (DESIGN.md section 3) and its canonical id string.
//
// Plan id grammar (stable; docs/plans.md has the full description). Tokens are separated by '.', all lower case:
//
//   <arch>.<family>.<dtype>.d<D>.q<B_Q><map>.kv<B_KV><map>.g<G>[p].t<trav>.split<P>.s<S>.w<W>
//
//   arch    sm80 | sm86 | sm89 | sm90a | sm120
//   family  mma | wgmma                      (kernel family of the catalog entry e)
//   dtype   bf16 | f16
//   d<D>    head_dim: 64 | 96 | 128 | 256
//   q<B_Q><map>, kv<B_KV><map>   logical block size in tokens (multiple of 16 in [16, 1024]) and the mapping:
//           d    Direct            T = B
//           c<N> Coarsened span    T = N * B, N in {2, 4, 8}, membership bitmasks
//           p<N> Coarsened packed  KV only: a tile gathers N active kv blocks (T = N * B), N in {2, 4, 8}
//           r<N> Refined           T = B / N, N in [2, 64] with B / N a multiple of 16 (3, 6: 384-token STA blocks
//                                  on 128/64 tiles; 5: 80-token blocks on 16-token tiles)
//   g<G>[p] grouping: G query-tile work items per CTA (1..64); suffix 'p' = persistent CTAs pulling the work
//           list in longest-first order
//   t<trav> kv traversal order inside a tile row: asc | desc | run (run-major: runs of consecutive kv tiles,
//           longest first, ascending inside a run)
//   split<P> split-KV partitions per query tile: 1, 2, 4, 8, 16, 32 or 64
//   s<S>    K/V pipeline stages: 1..4. 1 = no K prefetch (one K buffer: K(j+1) is issued after QK^T of tile j
//           and overlaps only its PV product); S >= 2 keeps S - 1 tiles in flight ahead of the current one
//           (the 2..4 stages; s1 is a Tessera addition for shared-memory-bound tiles)
//   w<W>    warps per CTA of the catalog entry: 1..16
//
// Example: sm90a.mma.bf16.d128.q64c2.kv64p2.g1.tasc.split2.s2.w8 (runs mma.bf16.d128.t128x128.w8.s2)
// parse_plan_id(plan_id(P)) == P for every valid plan; parse errors name the bad token.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/catalog_entry.hpp"
#include "tessera/dtype.hpp"

namespace tessera {

/// Largest Refined factor: a 1024-token block (the largest) on 16-token tiles (the smallest).
inline constexpr int kMaxRefineFactor = 64;

/// GPU architecture a plan (and a catalog) targets.
enum class Arch : std::uint8_t { kSm80, kSm86, kSm89, kSm90a, kSm120 };

/// Plan-id spelling of an architecture: "sm80", "sm86", "sm89", "sm90a", "sm120".
std::string_view arch_name(Arch a) noexcept;

/// Inverse of arch_name(): the architecture spelled `name`, or nullopt for an unknown name.
std::optional<Arch> arch_from_name(std::string_view name) noexcept;

/// Physical mapping of one dimension (DESIGN.md section 3).
enum class MappingKind : std::uint8_t {
  kDirect,    ///< T = B
  kCoarsen,   ///< span tile of factor logical blocks, T = factor * B; membership bits
  kPacked,    ///< KV only: gathered tile of `factor` active kv blocks (not necessarily adjacent)
  kRefine,    ///< T = B / factor
};

/// Mapping of one dimension: kind and factor.
struct DimMapping {
  MappingKind kind = MappingKind::kDirect;
  int factor = 1;  ///< Coarsened / packed: 2, 4 or 8; Refined: 2..kMaxRefineFactor; Direct: 1
  bool operator==(const DimMapping&) const = default;

  /// Physical tile size for logical block size `block` (tokens): B, N*B or B/N.
  int tile(int block) const noexcept {
    switch (kind) {
      case MappingKind::kDirect: return block;
      case MappingKind::kCoarsen:
      case MappingKind::kPacked: return block * factor;
      case MappingKind::kRefine: return block / factor;
    }
    return block;
  }
  /// Logical blocks a tile spans (c for Coarsened/packed, else 1): the membership sub-block count.
  int sub_blocks() const noexcept {
    return (kind == MappingKind::kCoarsen || kind == MappingKind::kPacked) ? factor : 1;
  }
  /// Tiles per logical block (r for Refined, else 1).
  int refine() const noexcept { return kind == MappingKind::kRefine ? factor : 1; }
};

/// Order in which a CTA visits the kv tiles of its tile row.
enum class Traversal : std::uint8_t {
  kAscending,  ///< increasing kv position (the builders' natural order)
  kDescending, ///< reversed
  kRunMajor,   ///< runs of consecutive kv tiles, longest run first (ties: earlier run first), ascending inside
};

/// Plan-id spelling of a traversal: "asc", "desc", "run".
std::string_view traversal_name(Traversal t) noexcept;

/// Task organization sigma.
struct TaskOrganization {
  int group = 1;            ///< query-tile work items per CTA (1..64)
  bool persistent = false;  ///< persistent CTAs pull the work list (longest first)
  Traversal traversal = Traversal::kAscending;
  int split = 1;            ///< split-KV partitions per query tile (power of two, 1..64)
  int stages = 2;           ///< K/V pipeline depth (1..4; 1 = no prefetch)
  bool operator==(const TaskOrganization&) const = default;
};

/// A physical plan: target, logical geometry, per-dimension mapping, task organization and the kernel entry
/// (family + warps + stages + tile, which together with dtype/head_dim name one catalog entry).
struct Plan {
  Arch arch = Arch::kSm90a;
  KernelFamily family = KernelFamily::kMma;
  DType dtype = DType::kBFloat16;
  int head_dim = 128;
  int block_q = 64;   ///< B_Q, tokens
  int block_kv = 64;  ///< B_KV, tokens
  DimMapping q;       ///< g_Q (Packed not allowed)
  DimMapping kv;      ///< g_KV
  TaskOrganization org;
  int warps = 4;
  bool operator==(const Plan&) const = default;

  int tile_q() const noexcept { return q.tile(block_q); }     ///< T_Q
  int tile_kv() const noexcept { return kv.tile(block_kv); }  ///< T_KV
  bool packed_kv() const noexcept { return kv.kind == MappingKind::kPacked; }
  /// Whether the plan's tiles carry membership bits (Coarsened or packed on either dimension).
  bool has_membership() const noexcept { return q.sub_blocks() > 1 || kv.sub_blocks() > 1 || packed_kv(); }
};

/// Canonical id string of a plan (grammar above). Throws Error(kInvalidArgument, "plan") when the plan is not
/// well formed (see check_plan).
std::string plan_id(const Plan& plan);

/// Parses a plan id. Throws Error(kInvalidArgument, "plan_id") whose message names the bad token and says what
/// was expected, e.g. "token 5 'kv64x4': unknown mapping 'x4' (expected d, cN, pN or rN)".
Plan parse_plan_id(std::string_view id);

/// Checks that a plan is well formed on its own (factors, ranges, Packed only on KV, refined tile >= 16 and a
/// multiple of 16, ...). Throws Error(kInvalidArgument, "plan.<field>").
void check_plan(const Plan& plan);

/// Catalog entry name the plan runs on: "<family>.<dtype>.d<D>.t<T_Q>x<T_KV>.w<W>.s<S>".
std::string plan_kernel_name(const Plan& plan);

/// "mma" or "wgmma".
std::string_view family_name(KernelFamily f) noexcept;

}  // namespace tessera
