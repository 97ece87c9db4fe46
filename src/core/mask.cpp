#include "tessera/mask.hpp"

namespace tessera {

const char* mask_format_name(MaskFormat f) noexcept {
  switch (f) {
    case MaskFormat::kDense: return "dense";
    case MaskFormat::kBlockCsr: return "block-csr";
    case MaskFormat::kIndexLists: return "index-lists";
  }
  return "?";
}

BlockMask BlockMask::from_dense(const TensorView& dense) {
  BlockMask m;
  m.format = MaskFormat::kDense;
  m.dense = dense;
  if (dense.rank == 4) {
    m.batch = dense.shape[0];
    m.heads = dense.shape[1];
    m.n_qb = dense.shape[2];
    m.n_kvb = dense.shape[3];
  }
  return m;
}

BlockMask BlockMask::from_block_csr(const TensorView& row_offsets, const TensorView& col_indices, std::int64_t batch,
                                    std::int64_t heads, std::int64_t n_qb, std::int64_t n_kvb) {
  BlockMask m;
  m.format = MaskFormat::kBlockCsr;
  m.row_offsets = row_offsets;
  m.col_indices = col_indices;
  m.batch = batch;
  m.heads = heads;
  m.n_qb = n_qb;
  m.n_kvb = n_kvb;
  return m;
}

BlockMask BlockMask::from_index_lists(const TensorView& counts, const TensorView& indices, std::int64_t n_kvb) {
  BlockMask m;
  m.format = MaskFormat::kIndexLists;
  m.counts = counts;
  m.indices = indices;
  if (counts.rank == 3) {
    m.batch = counts.shape[0];
    m.heads = counts.shape[1];
    m.n_qb = counts.shape[2];
  }
  m.n_kvb = n_kvb;
  return m;
}

}  // namespace tessera
