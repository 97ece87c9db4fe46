#pragma once
// Host launch glue of the mma.sync attention family: parameters, the registry of compiled catalog entries and
// the launchers. No CUDA headers needed (streams are tessera::Stream).
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/tile_metadata.hpp"
#include "tessera/cuda_types.hpp"
#include "tessera/dtype.hpp"

namespace tessera::kernels {

/// How an attention kernel reads its KV tiles (every catalog entry is compiled in all three variants).
enum class KvVariant : std::uint8_t {
  kSpan,        ///< span tiles (kv_tile[e] * T_KV), no membership masking (Direct, Refined); member must be null
  kSpanMasked,  ///< span tiles with membership masking (Coarsened span plans); member may be null (= all active)
  kPacked,      ///< packed (gathered) KV tiles: c_kv logical blocks of B_KV tokens; optional membership
};

/// Name of a KvVariant: "span", "span_masked", "packed".
const char* kv_variant_name(KvVariant v) noexcept;

/// Everything one attention launch needs. Strides are in elements; the head dimension is contiguous.
/// Q, O: [B, N_q, H_q, D]; K, V: [B, N_kv, H_kv, D] (any strides on the first three dimensions, each a
/// multiple of 8 elements, pointers 16-byte aligned); dtype bf16 or fp16; O in the input dtype.
/// LSE: fp32 [B, H_q, N_q] at lse + b*lse_stride_b + h*lse_stride_h + i (natural log; -inf for empty rows);
/// may be null (not written). Workspace for split-KV items (WorkItem::partial >= 0):
/// o_partial fp32 [n_partials, T_Q, D], lse_partial fp32 [n_partials, T_Q].
struct AttentionParams {
  DType dtype = DType::kBFloat16;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;
  std::int64_t q_stride_b = 0, q_stride_n = 0, q_stride_h = 0;
  std::int64_t k_stride_b = 0, k_stride_n = 0, k_stride_h = 0;
  std::int64_t v_stride_b = 0, v_stride_n = 0, v_stride_h = 0;
  std::int64_t o_stride_b = 0, o_stride_n = 0, o_stride_h = 0;
  std::int64_t lse_stride_b = 0, lse_stride_h = 0;
  std::int32_t batch = 0, n_q = 0, n_kv = 0, h_q = 0, h_kv = 0, head_dim = 0;
  std::int32_t block_q = 0;   ///< logical block B_Q (tokens)
  std::int32_t block_kv = 0;  ///< logical block B_KV (tokens)
  float scale = 0.f;          ///< softmax scale (usually 1/sqrt(D))
  TileMetadataView meta;      ///< device pointers
  float* o_partial = nullptr;
  float* lse_partial = nullptr;
  /// Persistent CTAs (meta.persistent on an entry that has them: the wgmma family's 64- and 128-row tiles, see
  /// CompiledEntry::persistent_ctas): the most CTAs to launch; 0: as many as are resident on the GPU at once
  /// (occupancy x SMs). Each CTA runs item blockIdx.x, then takes further items from meta.item_counter. Kernels that
  /// run one CTA per item ignore it. Tests set it small so that every CTA runs several items.
  std::int32_t max_ctas = 0;
};

/// Static description of one compiled catalog entry (a row of catalog.def that the build compiled).
struct CompiledEntry {
  std::string_view name;
  DType dtype;
  int head_dim, tile_q, tile_kv, warps, stages;
  std::size_t smem_bytes;  ///< dynamic shared memory per CTA
  /// Whether the kernel runs persistent CTAs for plans that ask for them (TileMetadataView::persistent); others run
  /// one CTA per work item of the list whatever the plan (CatalogEntry::persistent_ctas).
  bool persistent_ctas = false;
};

/// Every entry compiled into this build (filtered by TESSERA_KERNEL_FILTER), in catalog order.
const std::vector<CompiledEntry>& compiled_entries();

/// The compiled entry named `name`, or nullptr.
const CompiledEntry* find_compiled_entry(std::string_view name) noexcept;

/// Validates `p` against entry `name` and variant (Error kInvalidArgument naming the field, or kUnsupported
/// when the entry is not compiled), then launches one CTA per work item on `stream` (persistent kernels: at most
/// p.max_ctas CTAs, or as many as are resident, each looping over items). Asynchronous.
void launch_attention(std::string_view name, KvVariant variant, const AttentionParams& p, Stream stream);

/// Merges split-KV partials (p.o_partial, p.lse_partial, tile_q rows per slot) into p.o / p.lse for the
/// p.meta.merge_* index: O = sum_s exp(lse_s - LSE) O_s, LSE = ln sum_s exp(lse_s); all-empty rows get
/// O = 0, LSE = -inf. Asynchronous.
void launch_merge(const AttentionParams& p, int tile_q, Stream stream);

/// Throws the validation error launch_attention would throw, without launching (for callers that check early).
void validate_attention(const CompiledEntry& e, KvVariant variant, const AttentionParams& p);

}  // namespace tessera::kernels
