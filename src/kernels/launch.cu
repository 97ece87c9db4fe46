// Host launch glue of the mma.sync attention family: registry lookup, validation, merge launch.
#include "kernels/launch.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "cuda/check.cuh"
#include "kernels/mma/merge.cuh"
#include "kernels/registry.hpp"
#include "tessera/error.hpp"

namespace tessera::kernels {
namespace {

[[noreturn]] void bad(const std::string& arg, const std::string& msg) {
  throw Error(ErrorCode::kInvalidArgument, arg, msg);
}

void require_aligned(const void* ptr, const char* arg) {
  if (ptr == nullptr) bad(arg, "null pointer");
  if (reinterpret_cast<std::uintptr_t>(ptr) % 16 != 0) bad(arg, "pointer must be 16-byte aligned");
}

void require_stride8(std::int64_t s, const char* arg) {
  if (s % 8 != 0) bad(arg, "stride " + std::to_string(s) + " must be a multiple of 8 elements (16 bytes)");
}

/// Checks the mapping ratio of a dimension: logical block B vs physical tile T.
void check_ratio(int b, int t, const char* arg) {
  if (b <= 0 || b % 16 != 0) bad(arg, "logical block " + std::to_string(b) + " must be a positive multiple of 16");
  if (b < t && (t % b != 0 || t / b > kMaxMappingFactor))
    bad(arg, "tile " + std::to_string(t) + " must be c * block " + std::to_string(b) + " with c <= 8");
  if (b > t && b % t != 0)
    bad(arg, "block " + std::to_string(b) + " must be a multiple of tile " + std::to_string(t));
}

}  // namespace

const char* kv_variant_name(KvVariant v) noexcept {
  switch (v) {
    case KvVariant::kSpan: return "span";
    case KvVariant::kSpanMasked: return "span_masked";
    case KvVariant::kPacked: return "packed";
  }
  return "?";
}

const std::vector<CompiledEntry>& compiled_entries() {
  static const std::vector<CompiledEntry> entries = [] {
    std::vector<CompiledEntry> v;
    for (const RegistryRow* r = kRegistry; r->name != nullptr; ++r)
      v.push_back({r->name, r->dtype, r->head_dim, r->tile_q, r->tile_kv, r->warps, r->stages, r->smem_bytes,
                   r->persistent_ctas});
    return v;
  }();
  return entries;
}

const CompiledEntry* find_compiled_entry(std::string_view name) noexcept {
  for (const auto& e : compiled_entries())
    if (e.name == name) return &e;
  return nullptr;
}

void validate_attention(const CompiledEntry& e, KvVariant variant, const AttentionParams& p) {
  if (p.dtype != e.dtype) bad("q.dtype", std::string(dtype_name(p.dtype)) + " does not match entry " + std::string(e.name));
  if (p.head_dim != e.head_dim) bad("head_dim", std::to_string(p.head_dim) + " does not match entry " + std::string(e.name));
  if (p.max_ctas < 0) bad("max_ctas", std::to_string(p.max_ctas) + " is negative (0: as many CTAs as are resident)");
  require_aligned(p.q, "q");
  require_aligned(p.k, "k");
  require_aligned(p.v, "v");
  require_aligned(p.o, "o");
  require_stride8(p.q_stride_b, "q.stride[0]"), require_stride8(p.q_stride_n, "q.stride[1]");
  require_stride8(p.q_stride_h, "q.stride[2]"), require_stride8(p.k_stride_b, "k.stride[0]");
  require_stride8(p.k_stride_n, "k.stride[1]"), require_stride8(p.k_stride_h, "k.stride[2]");
  require_stride8(p.v_stride_b, "v.stride[0]"), require_stride8(p.v_stride_n, "v.stride[1]");
  require_stride8(p.v_stride_h, "v.stride[2]"), require_stride8(p.o_stride_b, "o.stride[0]");
  require_stride8(p.o_stride_n, "o.stride[1]"), require_stride8(p.o_stride_h, "o.stride[2]");
  if (p.batch <= 0 || p.n_q <= 0 || p.n_kv <= 0) bad("q.shape", "batch, N_q and N_kv must be positive");
  if (p.h_q <= 0 || p.h_kv <= 0 || p.h_q % p.h_kv != 0) bad("k.shape[2]", "H_q must be a positive multiple of H_kv");
  if (!(p.scale > 0.f)) bad("scale", "must be positive");
  check_ratio(p.block_q, e.tile_q, "geometry.block_q");
  if (p.meta.implicit_items) {
    const QueryTileGeometry& g = p.meta.query_geometry;
    if (p.meta.tile_row_offsets == nullptr) bad("meta.tile_row_offsets", "null with implicit work items");
    if (g.q_tiles_per_head <= 0 || g.heads_q <= 0 || g.r_q <= 0 || g.tile_q <= 0)
      bad("meta.query_geometry", "not set for implicit work items");
    if (p.meta.n_items != g.q_tiles_per_head * g.heads_q * p.batch)
      bad("meta.n_items", "implicit work items are one per query tile");
    if (p.meta.n_merge != 0) bad("meta.n_merge", "implicit work items are unsplit (no merge)");
  } else if (p.meta.items == nullptr && p.meta.n_items > 0) {
    bad("meta.items", "null with n_items > 0");
  }
  if (p.meta.n_items < 0) bad("meta.n_items", "negative");
  if (p.meta.member != nullptr && variant != KvVariant::kSpan) {
    // A membership word holds 8 bits per query sub-block of the tile: at least that many bytes.
    const int words = p.meta.member_bytes, q_sub = p.block_q < e.tile_q ? e.tile_q / p.block_q : 1;
    if ((words != 1 && words != 2 && words != 4 && words != 8) || words < q_sub)
      bad("meta.member_bytes", std::to_string(words) + " bytes per membership word; must be 1, 2, 4 or 8 and at least "
                                   "the tile's " + std::to_string(q_sub) + " query sub-blocks");
  }
  switch (variant) {
    case KvVariant::kSpan:
      check_ratio(p.block_kv, e.tile_kv, "geometry.block_kv");
      if (p.meta.member != nullptr) bad("meta.member", "the span variant has no membership masking; use span_masked");
      if (p.meta.kv_tile == nullptr && p.meta.n_entries > 0) bad("meta.kv_tile", "null for span tiles");
      break;
    case KvVariant::kSpanMasked:
      check_ratio(p.block_kv, e.tile_kv, "geometry.block_kv");
      if (p.meta.kv_tile == nullptr && p.meta.n_entries > 0) bad("meta.kv_tile", "null for span tiles");
      break;
    case KvVariant::kPacked:
      if (p.meta.gather_blocks == nullptr && p.meta.n_entries > 0) bad("meta.gather_blocks", "null for packed tiles");
      if (p.meta.c_kv_gather < 1 || p.meta.c_kv_gather > kMaxMappingFactor ||
          p.meta.c_kv_gather * p.block_kv != e.tile_kv)
        bad("meta.c_kv_gather", "packed tiles need c_kv (" + std::to_string(p.meta.c_kv_gather) + ") * B_KV (" +
                                    std::to_string(p.block_kv) + ") == T_KV (" + std::to_string(e.tile_kv) +
                                    ") and c_kv <= 8");
      break;
  }
  if (p.meta.n_partials > 0 && (p.o_partial == nullptr || p.lse_partial == nullptr))
    bad("workspace", "split-KV items need o_partial and lse_partial");
  if (p.meta.persistent != 0 && e.persistent_ctas) {
    if (p.meta.item_counter == nullptr)
      bad("meta.item_counter", "null: persistent CTAs take their items from this counter");
    if (reinterpret_cast<std::uintptr_t>(p.meta.item_counter) % 4 != 0)
      bad("meta.item_counter", "pointer must be 4-byte aligned");
  }
}

void launch_attention(std::string_view name, KvVariant variant, const AttentionParams& p, Stream stream) {
  const RegistryRow* row = nullptr;
  for (const RegistryRow* r = kRegistry; r->name != nullptr; ++r)
    if (name == r->name) row = r;
  if (row == nullptr) throw Error(ErrorCode::kUnsupported, "entry", "catalog entry '" + std::string(name) + "' is not compiled in this build");
  validate_attention(*find_compiled_entry(name), variant, p);
  row->launch(variant, p, stream);
}

void launch_merge(const AttentionParams& p, int tile_q, Stream stream) {
  if (p.meta.n_merge == 0) return;
  if (p.meta.merge_offsets == nullptr || p.meta.merge_targets == nullptr) bad("meta.merge_offsets", "null merge index");
  if (p.o_partial == nullptr || p.lse_partial == nullptr) bad("workspace", "null partial buffers");
  require_aligned(p.o, "o");
  if (tile_q <= 0) bad("tile_q", "must be positive");
  const dim3 grid(p.meta.n_merge, (tile_q + 4 * mma::kMergeWarps - 1) / (4 * mma::kMergeWarps));
  const dim3 block(32 * mma::kMergeWarps);
  auto s = static_cast<cudaStream_t>(stream);
  if (p.dtype == DType::kBFloat16 && p.head_dim == 128) mma::merge_kernel<__nv_bfloat16, 128><<<grid, block, 0, s>>>(p, tile_q);
  else if (p.dtype == DType::kBFloat16 && p.head_dim == 64) mma::merge_kernel<__nv_bfloat16, 64><<<grid, block, 0, s>>>(p, tile_q);
  else if (p.dtype == DType::kFloat16 && p.head_dim == 128) mma::merge_kernel<__half, 128><<<grid, block, 0, s>>>(p, tile_q);
  else if (p.dtype == DType::kFloat16 && p.head_dim == 64) mma::merge_kernel<__half, 64><<<grid, block, 0, s>>>(p, tile_q);
  else bad("head_dim", "merge supports bf16/fp16 with head_dim 64 or 128");
  TESSERA_CUDA_CHECK_LAUNCH();
}

}  // namespace tessera::kernels
