// build_mask_state_cpu(): mu(M) on the host (the CPU twin of src/cuda/mask_state.cu).
#include <algorithm>
#include <cstring>

#include "core/coarsened_pairs.hpp"
#include "core/mask_checks.hpp"
#include "tessera/error.hpp"
#include "tessera/mask_state.hpp"

namespace tessera {

namespace {

/// Adds one canonical row (strictly increasing columns) to the counters.
void count_row(const std::int32_t* cols, std::int64_t n, MaskCounters& c) {
  c.active_blocks += n;
  c.max_row_active = std::max(c.max_row_active, n);
  if (n == 0) {
    ++c.empty_rows;
    return;
  }
  std::int64_t run = 1;
  for (std::int64_t i = 1; i <= n; ++i) {
    if (i < n && cols[i] == cols[i - 1] + 1) {
      ++run;
      continue;
    }
    ++c.runs;
    if (run >= 2) c.blocks_in_long_runs += run;
    run = 1;
  }
}

void build_from_dense(const BlockMask& m, HostMaskState& s) {
  const TensorView& t = m.dense;
  const auto* base = static_cast<const unsigned char*>(t.data);
  std::int64_t row = 0;
  for (std::int64_t b = 0; b < m.batch; ++b) {
    for (std::int64_t h = 0; h < m.heads; ++h) {
      for (std::int64_t qb = 0; qb < m.n_qb; ++qb, ++row) {
        const unsigned char* p = base + b * t.stride[0] + h * t.stride[1] + qb * t.stride[2];
        for (std::int64_t j = 0; j < m.n_kvb; ++j) {
          if (p[j * t.stride[3]] != 0) s.col_indices.push_back(static_cast<std::int32_t>(j));
        }
        if (static_cast<std::int64_t>(s.col_indices.size()) > detail::kMaxMaskActiveBlocks) {
          throw Error(ErrorCode::kUnsupported, "mask.dense",
                      "more than 2^31 - 1 active blocks (block-CSR offsets are int32)");
        }
        s.row_offsets[row + 1] = static_cast<std::int32_t>(s.col_indices.size());
      }
    }
  }
}

void build_from_csr(const BlockMask& m, HostMaskState& s) {
  const auto* off = static_cast<const std::int32_t*>(m.row_offsets.data);
  const auto* col = static_cast<const std::int32_t*>(m.col_indices.data);
  const std::int64_t nnz = m.col_indices.shape[0];
  std::memcpy(s.row_offsets.data(), off, s.row_offsets.size() * sizeof(std::int32_t));
  s.col_indices.assign(col, col + nnz);
}

void build_from_index_lists(const BlockMask& m, HostMaskState& s) {
  const auto* cnt = static_cast<const std::int32_t*>(m.counts.data);
  const auto* idx = static_cast<const std::int32_t*>(m.indices.data);
  const std::int64_t k_max = detail::mask_k_max(m);
  std::int64_t total = 0;
  for (std::int64_t r = 0; r < m.rows(); ++r) total += cnt[r];
  if (total > detail::kMaxMaskActiveBlocks) {
    throw Error(ErrorCode::kUnsupported, "mask.counts",
                "the counts sum to " + std::to_string(total) + " active blocks, more than 2^31 - 1 (int32 offsets)");
  }
  s.col_indices.reserve(static_cast<std::size_t>(total));
  for (std::int64_t r = 0; r < m.rows(); ++r) {
    const std::size_t begin = s.col_indices.size();
    s.col_indices.insert(s.col_indices.end(), idx + r * k_max, idx + r * k_max + cnt[r]);
    std::sort(s.col_indices.begin() + static_cast<std::ptrdiff_t>(begin), s.col_indices.end());
    s.row_offsets[r + 1] = static_cast<std::int32_t>(s.col_indices.size());
  }
}

}  // namespace

MaskCounters count_mask_csr(const MaskShape& shape, const std::int32_t* row_offsets, const std::int32_t* col_indices) {
  MaskCounters c;
  const std::int64_t rows = shape.rows();
  for (std::int64_t r = 0; r < rows; ++r)
    count_row(col_indices + row_offsets[r], row_offsets[r + 1] - row_offsets[r], c);
  // Coarsened pairs: each aligned group of 8 query blocks of one (batch, head) merges its rows' sorted lists (no
  // table of n_kvb slots: n_kvb may be ~2^31).
  for (std::int64_t first = 0; first < rows; first += shape.n_qb)
    for (std::int64_t qb = 0; qb < shape.n_qb; qb += 8) {
      const int n = static_cast<int>(std::min<std::int64_t>(8, shape.n_qb - qb));
      std::int64_t pos[8] = {}, end[8] = {};
      for (int r = 0; r < n; ++r) pos[r] = row_offsets[first + qb + r], end[r] = row_offsets[first + qb + r + 1];
      detail::add_group_coarsened_pairs(col_indices, pos, end, n, shape.n_kvb, c.coarsened_pairs);
    }
  return c;
}

HostMaskState build_mask_state_cpu(const BlockMask& mask) {
  const Device d = detail::check_mask_structure(mask);
  if (d != Device::kCpu) {
    throw Error(ErrorCode::kInvalidArgument, "mask", "build_mask_state_cpu() needs a mask in CPU memory (got cuda)");
  }
  detail::check_mask_contents_host(mask);
  HostMaskState s;
  s.shape = detail::mask_shape(mask);
  s.row_offsets.assign(static_cast<std::size_t>(mask.rows() + 1), 0);
  switch (mask.format) {
    case MaskFormat::kDense:
      build_from_dense(mask, s);
      break;
    case MaskFormat::kBlockCsr:
      build_from_csr(mask, s);
      break;
    case MaskFormat::kIndexLists:
      build_from_index_lists(mask, s);
      break;
  }
  s.stats = derive_mask_stats(s.shape, count_mask_csr(s.shape, s.row_offsets.data(), s.col_indices.data()));
  return s;
}

}  // namespace tessera
