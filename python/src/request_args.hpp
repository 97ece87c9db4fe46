#pragma once
// The argument list shared by the CPU and GPU entry points of tessera._C, and its conversion to an AttentionRequest.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>

#include <optional>

#include "tensor_convert.hpp"
#include "tessera/request.hpp"
#include "tessera/runtime.hpp"

namespace tessera::py {

/// Mask kinds as passed from Python (tessera/api.py): 0 dense, 1 block-CSR, 2 index lists.
enum MaskKind : int { kMaskDense = 0, kMaskCsr = 1, kMaskIndexLists = 2 };

/// Builds the request. o and lse are outputs written through their views (lse may be None).
/// mask: kind 0 -> m0 = dense [B_m, H_m, n_qb, n_kvb]; kind 1 -> m0 = row_offsets, m1 = col_indices with extents
/// (mb, mh, n_qb, n_kvb); kind 2 -> m0 = counts, m1 = indices, n_kvb. Throws tessera::Error naming the argument.
AttentionRequest make_request(const Array& q, const Array& k, const Array& v, const Array& o,
                              const std::optional<Array>& lse, int block_q, int block_kv, int mask_kind,
                              const Array& m0, const std::optional<Array>& m1, std::int64_t mb, std::int64_t mh,
                              std::int64_t n_qb, std::int64_t n_kvb, std::optional<double> scale);

/// Python dict of a DispatchInfo (plan_id, regime, source, ranks_skipped, cache_hit, speculation, mask statistics, timings).
nanobind::dict dispatch_to_dict(const DispatchInfo& info);

}  // namespace tessera::py
