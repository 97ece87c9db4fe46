#pragma once
// Row-level rules of launch preparation, shared word for word by the CPU twins (src/core/launch_prep_cpu_*.cpp)
// and the GPU builders (src/cuda/launch_prep*.cu). The drivers differ (loops + std algorithms on the CPU; one
// thread per tile row / query tile + CUB scans and sorts on the GPU); these functions define what one row or one
// query tile produces, so the two agree bit for bit by construction of the rules, and the tests check the drivers.
//
// Mapping of the logical block mask (block-CSR of mu(M)) onto tile rows (DESIGN.md section 3):
//  - Tile row t of mask head mh covers logical query blocks t*c_q .. t*c_q + c_q - 1 (c_q = 1 unless Coarsened-Q;
//    a Refined-Q plan reuses the logical rows: several query tiles point at one tile row).
//  - The row's kv units are the union over those logical rows of: col / c_kv (Coarsened-span KV), col (Direct,
//    Refined, packed KV), visited in ascending order. A unit records membership bit (qi * 8 + kj) for every
//    active (qi, col) pair: kj = col % c_kv (Coarsened span), kj = slot in the packed tile (packed), else 0.
//  - Direct / Coarsened-span KV: one entry per unit, kv_tile = unit.
//  - Refined-r KV: unit u -> entries kv_tile = u*r + j, j < r, only while (u*r + j) * T_KV < N_kv (ragged tail).
//  - Packed-c KV: units grouped in order into entries of c slots, gather_blocks = unit (-1 padding).
// Traversal reorders a row's entries: asc (as built), desc (reversed), run-major (maximal runs of consecutive
// entries, longest first, ties in ascending position; entries ascend inside a run). Entries e-1, e are
// consecutive when kv_tile[e] == kv_tile[e-1] + 1 (span) or gather_blocks[e][0] == (last valid block of e-1) + 1
// (packed).
#include <cstdint>

#include "core/hd.hpp"
#include "core/query_tiles.hpp"
#include "core/tile_metadata.hpp"

namespace tessera::prep {

/// Everything the row rules need, derived on the host from the plan, mu(M)'s shape and the problem shape.
struct PrepParams {
  // mapping
  std::int32_t c_q = 1;      ///< Coarsened-Q factor (1 otherwise)
  std::int32_t r_q = 1;      ///< Refined-Q factor (1 otherwise)
  std::int32_t c_kv = 1;     ///< Coarsened-span KV factor (1 otherwise)
  std::int32_t r_kv = 1;     ///< Refined-KV factor (1 otherwise)
  std::int32_t pack = 0;     ///< packed-KV factor (0 = span form)
  std::int32_t membership = 0;  ///< 1 = write member bits
  std::int32_t traversal = 0;   ///< Traversal as int: 0 asc, 1 desc, 2 run-major
  std::int32_t split = 1;
  std::int32_t tile_q = 0, tile_kv = 0;
  // mask and problem
  std::int64_t mask_batch = 1, mask_heads = 1;  ///< B_m, H_m
  std::int64_t n_qb = 0, n_kvb = 0;
  std::int64_t batch = 1, heads_q = 1;          ///< B, H_q
  std::int64_t n_q = 0, n_kv = 0;               ///< tokens
  std::int64_t rows_per_head = 0;               ///< tile rows per mask head: ceil(n_qb / c_q)
  std::int64_t q_tiles_per_head = 0;            ///< ceil(N_q / T_Q)
  std::int64_t kv_tiles = 0;                    ///< ceil(N_kv / T_KV) (span forms)
  // speculative preparation (GPU only: enqueued before the host has read mu(M)'s counters)
  const unsigned long long* gate_active = nullptr;  ///< device: mu(M)'s active blocks; null = not speculative
  const unsigned long long* gate_error = nullptr;   ///< device: nonzero when the mask is invalid
  std::int64_t gate_capacity = 0;                   ///< active blocks the buffers were sized for

  /// Whether a speculative preparation must not run (every builder kernel returns at once, before touching
  /// memory): the mask is invalid or has more active blocks than its buffers were sized for. Uniform over the grid.
  TESSERA_HD bool gated_off() const {
    return gate_active != nullptr &&
           (*gate_error != 0 || *gate_active > static_cast<unsigned long long>(gate_capacity));
  }

  TESSERA_HD std::int64_t tile_rows() const { return mask_batch * mask_heads * rows_per_head; }
  TESSERA_HD std::int64_t q_tiles() const { return batch * heads_q * q_tiles_per_head; }
  TESSERA_HD QueryTileGeometry query_geometry() const {
    QueryTileGeometry g;
    g.q_tiles_per_head = q_tiles_per_head;
    g.heads_q = heads_q;
    g.mask_batch = mask_batch;
    g.mask_heads = mask_heads;
    g.r_q = r_q;
    g.tile_q = tile_q;
    g.n_q = n_q;
    g.rows_per_head = rows_per_head;
    return g;
  }
};

/// Whether the tile-row offsets are mu(M)'s row offsets themselves (c_q == 1, Direct KV): then the builders read
/// and the work items use the mask's offsets, and tile_offsets is not written; every other plan's offsets need the
/// builders' count (a decoupled look-back in the single-launch builders).
inline bool tile_offsets_are_mask_offsets(const PrepParams& p) {
  return p.c_q == 1 && p.c_kv == 1 && p.r_kv == 1 && !p.pack;
}

/// Bytes per membership word in device memory: c_q (1, 2, 4 or 8) when the plan has membership, else 0 (no array).
/// Bit qi * 8 + kj has qi < c_q, so c_q bytes hold every bit: the GPU builders store words of this width (the
/// membership stores were the largest part of launch preparation's traffic with 8 bytes per entry), the kernels read
/// them zero-extended (member_bits in core/tile_metadata.hpp) and download_tile_metadata widens them to the host's
/// uint64 words. Host metadata (the CPU twins) always uses 8-byte words.
TESSERA_HD inline std::int32_t member_bytes(const PrepParams& p) { return p.membership ? p.c_q : 0; }

/// Builds tile row `row` in ascending order from the mask CSR. Writes kv_tile / member / gather (each may be null:
/// then it only counts; member is written only when p.membership). Returns the number of entries.
TESSERA_HD inline std::int32_t build_tile_row(const PrepParams& p, const std::int32_t* row_offsets,
                                              const std::int32_t* cols, std::int64_t row, std::int32_t* kv_tile,
                                              std::uint64_t* member, std::int32_t* gather) {
  const std::int64_t mh = row / p.rows_per_head;
  const std::int64_t t = row % p.rows_per_head;
  std::int32_t cur[kMaxMappingFactor];
  std::int32_t end[kMaxMappingFactor];
  int nq = 0;
  for (int qi = 0; qi < p.c_q; ++qi) {
    const std::int64_t qb = t * p.c_q + qi;
    if (qb >= p.n_qb) {
      cur[qi] = end[qi] = 0;
      continue;
    }
    const std::int64_t lr = mh * p.n_qb + qb;
    cur[qi] = row_offsets[lr];
    end[qi] = row_offsets[lr + 1];
    nq = qi + 1;
  }
  const std::int32_t c_kv = p.c_kv;
  std::int32_t n_entries = 0;
  std::int32_t n_units = 0;
  for (;;) {
    // Smallest unit among the cursors.
    std::int32_t unit = -1;
    for (int qi = 0; qi < nq; ++qi) {
      if (cur[qi] < end[qi]) {
        const std::int32_t u = cols[cur[qi]] / c_kv;
        if (unit < 0 || u < unit) unit = u;
      }
    }
    if (unit < 0) break;
    const std::int32_t slot = p.pack ? n_units % p.pack : 0;
    std::uint64_t bits = 0;
    for (int qi = 0; qi < nq; ++qi) {
      while (cur[qi] < end[qi] && cols[cur[qi]] / c_kv == unit) {
        const std::int32_t kj = p.pack ? slot : (cols[cur[qi]] % c_kv);
        bits |= std::uint64_t{1} << (qi * 8 + kj);
        ++cur[qi];
      }
    }
    if (p.pack) {
      if (slot == 0) {
        if (gather) {
          for (int j = 0; j < p.pack; ++j) gather[static_cast<std::int64_t>(n_entries) * p.pack + j] = -1;
        }
        if (member && p.membership) member[n_entries] = 0;
        ++n_entries;
      }
      if (gather) gather[static_cast<std::int64_t>(n_entries - 1) * p.pack + slot] = unit;
      if (member && p.membership) member[n_entries - 1] |= bits;
    } else {
      for (std::int32_t j = 0; j < p.r_kv; ++j) {
        const std::int64_t tile = static_cast<std::int64_t>(unit) * p.r_kv + j;
        if (tile >= p.kv_tiles) break;
        if (kv_tile) kv_tile[n_entries] = static_cast<std::int32_t>(tile);
        if (member && p.membership) member[n_entries] = bits;
        ++n_entries;
      }
    }
    ++n_units;
  }
  return n_entries;
}

/// First index in [lo, hi) with a[index] >= v (a sorted ascending), or hi.
TESSERA_HD inline std::int32_t lower_bound_i32(const std::int32_t* a, std::int32_t lo, std::int32_t hi, std::int32_t v) {
  while (lo < hi) {
    const std::int32_t mid = lo + (hi - lo) / 2;
    if (a[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/// Number of kv units of a tile row's unit space: ceil(n_kvb / c_kv).
TESSERA_HD inline std::int32_t row_units(const PrepParams& p) {
  return static_cast<std::int32_t>((p.n_kvb + p.c_kv - 1) / p.c_kv);
}

/// Units and entries a unit range of a tile row produces.
struct RangeCount {
  std::int32_t units;
  std::int32_t entries;  ///< span forms; for packed, entries are derived from the row's total units
};

/// The part of build_tile_row() that comes from the kv units [u_lo, u_hi) of tile row `row` (parallel form used by
/// the GPU builder: a warp splits a row's unit space over its lanes). Output pointers are offset to the row's
/// first entry and may be null (count only). Span forms write entries entry_base + k; the packed form places the
/// range's k-th unit at global unit index unit_base + k (entry (unit_base + k) / pack, slot (unit_base + k) % pack)
/// and ORs membership bits into an entry another range may share (`atomic_or` on the device), so for the packed
/// form the caller must first set member = 0 and gather = -1. Concatenating the ranges of a partition of
/// [0, row_units) reproduces build_tile_row() exactly (tested on the CPU).
TESSERA_HD inline RangeCount build_tile_row_range(const PrepParams& p, const std::int32_t* row_offsets,
                                                  const std::int32_t* cols, std::int64_t row, std::int32_t u_lo,
                                                  std::int32_t u_hi, std::int32_t unit_base, std::int32_t entry_base,
                                                  std::int32_t* kv_tile, std::uint64_t* member, std::int32_t* gather) {
  const std::int64_t mh = row / p.rows_per_head;
  const std::int64_t t = row % p.rows_per_head;
  std::int32_t cur[kMaxMappingFactor];
  std::int32_t end[kMaxMappingFactor];
  int nq = 0;
  for (int qi = 0; qi < p.c_q; ++qi) {
    const std::int64_t qb = t * p.c_q + qi;
    if (qb >= p.n_qb) {
      cur[qi] = end[qi] = 0;
      continue;
    }
    const std::int64_t lr = mh * p.n_qb + qb;
    const std::int32_t b = row_offsets[lr], e = row_offsets[lr + 1];
    cur[qi] = lower_bound_i32(cols, b, e, u_lo * p.c_kv);
    end[qi] = lower_bound_i32(cols, cur[qi], e, u_hi * p.c_kv);
    nq = qi + 1;
  }
  const std::int32_t c_kv = p.c_kv;
  RangeCount rc{0, 0};
  for (;;) {
    std::int32_t unit = -1;
    for (int qi = 0; qi < nq; ++qi) {
      if (cur[qi] < end[qi]) {
        const std::int32_t u = cols[cur[qi]] / c_kv;
        if (unit < 0 || u < unit) unit = u;
      }
    }
    if (unit < 0) break;
    const std::int32_t g = unit_base + rc.units;
    const std::int32_t slot = p.pack ? g % p.pack : 0;
    std::uint64_t bits = 0;
    for (int qi = 0; qi < nq; ++qi) {
      while (cur[qi] < end[qi] && cols[cur[qi]] / c_kv == unit) {
        const std::int32_t kj = p.pack ? slot : (cols[cur[qi]] % c_kv);
        bits |= std::uint64_t{1} << (qi * 8 + kj);
        ++cur[qi];
      }
    }
    if (p.pack) {
      const std::int64_t e = g / p.pack;
      if (gather) gather[e * p.pack + slot] = unit;
      if (member && p.membership) {
#if defined(__CUDA_ARCH__)
        atomicOr(reinterpret_cast<unsigned long long*>(member + e), static_cast<unsigned long long>(bits));
#else
        member[e] |= bits;
#endif
      }
    } else {
      for (std::int32_t j = 0; j < p.r_kv; ++j) {
        const std::int64_t tile = static_cast<std::int64_t>(unit) * p.r_kv + j;
        if (tile >= p.kv_tiles) break;
        if (kv_tile) kv_tile[entry_base + rc.entries] = static_cast<std::int32_t>(tile);
        if (member && p.membership) member[entry_base + rc.entries] = bits;
        ++rc.entries;
      }
    }
    ++rc.units;
  }
  return rc;
}

/// Whether entry e continues a run started before it (see the file comment).
TESSERA_HD inline bool continues_run(const PrepParams& p, const std::int32_t* kv_tile, const std::int32_t* gather,
                                     std::int32_t e) {
  if (e == 0) return false;
  if (!p.pack) return kv_tile[e] == kv_tile[e - 1] + 1;
  const std::int32_t* prev = gather + static_cast<std::int64_t>(e - 1) * p.pack;
  std::int32_t last = -1;
  for (int j = 0; j < p.pack; ++j) {
    if (prev[j] >= 0) last = prev[j];
  }
  return gather[static_cast<std::int64_t>(e) * p.pack] == last + 1;
}

/// Copies one entry from (kv_in, mem_in, gather_in)[src] to (kv_out, mem_out, gather_out)[dst]. Member: the
/// membership word type (std::uint64_t on the host, MemberWord<member_bytes(p)> in device memory).
template <class Member>
TESSERA_HD inline void copy_entry(const PrepParams& p, const std::int32_t* kv_in, const Member* mem_in,
                                  const std::int32_t* gather_in, std::int32_t src, std::int32_t* kv_out,
                                  Member* mem_out, std::int32_t* gather_out, std::int32_t dst) {
  if (!p.pack) kv_out[dst] = kv_in[src];
  if (p.membership) mem_out[dst] = mem_in[src];
  if (p.pack) {
    for (int j = 0; j < p.pack; ++j)
      gather_out[static_cast<std::int64_t>(dst) * p.pack + j] = gather_in[static_cast<std::int64_t>(src) * p.pack + j];
  }
}

/// Writes the n entries of one row (inputs, in ascending order, already offset to the row) into the outputs
/// (offset to the row) in the plan's traversal order. Ascending is a plain copy.
TESSERA_HD inline void reorder_tile_row(const PrepParams& p, std::int32_t n, const std::int32_t* kv_in,
                                        const std::uint64_t* mem_in, const std::int32_t* gather_in,
                                        std::int32_t* kv_out, std::uint64_t* mem_out, std::int32_t* gather_out) {
  if (p.traversal == 1) {
    for (std::int32_t e = 0; e < n; ++e) copy_entry(p, kv_in, mem_in, gather_in, e, kv_out, mem_out, gather_out, n - 1 - e);
    return;
  }
  if (p.traversal != 2) {
    for (std::int32_t e = 0; e < n; ++e) copy_entry(p, kv_in, mem_in, gather_in, e, kv_out, mem_out, gather_out, e);
    return;
  }
  // Run-major: emit runs by decreasing length, ties in ascending position.
  std::int32_t max_len = 0;
  for (std::int32_t s = 0; s < n;) {
    std::int32_t e = s + 1;
    while (e < n && continues_run(p, kv_in, gather_in, e)) ++e;
    if (e - s > max_len) max_len = e - s;
    s = e;
  }
  std::int32_t out = 0;
  for (std::int32_t len = max_len; len >= 1 && out < n; --len) {
    for (std::int32_t s = 0; s < n;) {
      std::int32_t e = s + 1;
      while (e < n && continues_run(p, kv_in, gather_in, e)) ++e;
      if (e - s == len) {
        for (std::int32_t k = s; k < e; ++k) copy_entry(p, kv_in, mem_in, gather_in, k, kv_out, mem_out, gather_out, out++);
      }
      s = e;
    }
  }
}

/// Decodes query tile q of plan `p` (core/query_tiles.hpp).
TESSERA_HD inline QueryTile query_tile(const PrepParams& p, std::int64_t q) {
  return ::tessera::query_tile(p.query_geometry(), q);
}

/// Number of work items (= partitions) of a query tile with n_e entries: max(1, min(split, n_e)).
TESSERA_HD inline std::int32_t partitions(const PrepParams& p, std::int32_t n_e) {
  if (n_e <= 1) return 1;
  return n_e < p.split ? n_e : p.split;
}

/// Writes the k = partitions(n_e) work items of a query tile. Partition j covers entries
/// [begin + floor(n_e * j / k), begin + floor(n_e * (j + 1) / k)) (balanced by entry count). k == 1 writes O
/// directly (partial = -1); otherwise partition j writes partial slot slot_base + j.
TESSERA_HD inline void write_items(const PrepParams& p, const QueryTile& qt, std::int32_t begin, std::int32_t n_e,
                                   std::int32_t slot_base, WorkItem* out) {
  const std::int32_t k = partitions(p, n_e);
  // floor(n_e j / k) = (n_e / k) j + floor((n_e % k) j / k), exactly, in 32 bits (k <= 64): no 64-bit division.
  const std::int32_t whole = n_e / k, rest = n_e % k;
  for (std::int32_t j = 0; j < k; ++j) {
    WorkItem w;
    w.batch = qt.batch;
    w.head = qt.head;
    w.q_start = qt.q_start;
    w.q_len = qt.q_len;
    w.entry_begin = begin + whole * j + rest * j / k;
    w.entry_end = begin + whole * (j + 1) + rest * (j + 1) / k;
    w.tile_row = qt.tile_row;
    w.partial = k == 1 ? -1 : slot_base + j;
    out[j] = w;
  }
}

/// The merge target of a split query tile (partial = -1; entry range = the whole row).
TESSERA_HD inline WorkItem merge_target(const QueryTile& qt, std::int32_t begin, std::int32_t n_e) {
  WorkItem w;
  w.batch = qt.batch;
  w.head = qt.head;
  w.q_start = qt.q_start;
  w.q_len = qt.q_len;
  w.entry_begin = begin;
  w.entry_end = begin + n_e;
  w.tile_row = qt.tile_row;
  w.partial = -1;
  return w;
}

/// Sort key of the persistent work list: items are ordered by decreasing entry count, stably (radix sort of this
/// key ascending, stable, gives the order).
TESSERA_HD inline std::uint32_t persistent_key(const WorkItem& w) {
  return 0x7fffffffu - static_cast<std::uint32_t>(w.entry_end - w.entry_begin);
}

}  // namespace tessera::prep
