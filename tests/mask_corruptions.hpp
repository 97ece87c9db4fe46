#pragma once
// Test helper: invalid mask contents (block-CSR and index lists) with the error the builders must raise. Shared by
// the CPU test (build_mask_state_cpu) and the GPU test (build_mask_state_gpu must raise the very same error).
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include "mask_gen.hpp"

namespace tessera::testing {

struct MaskCorruption {
  const char* name;
  MaskFormat format;
  std::function<void(HostMaskTensors&)> corrupt;
  const char* argument;
  const char* fragment;
};

/// The base mask the corruptions apply to: full, [2, 3, 5, 40] (30 rows of 40 blocks, nnz 1200; lists K_max 42).
inline HostMaskTensors corruption_base(MaskFormat f) {
  std::mt19937_64 g(99);
  const MaskShape s{2, 3, 5, 40};
  const auto bits = random_mask_bits(s, MaskPattern::kFull, 1.0, g);
  return f == MaskFormat::kBlockCsr ? encode_csr(s, bits) : encode_index_lists(s, bits, 2, &g);
}

inline std::vector<MaskCorruption> mask_corruptions() {
  constexpr auto kCsr = MaskFormat::kBlockCsr;
  constexpr auto kList = MaskFormat::kIndexLists;
  return {
      {"csr first offset", kCsr, [](HostMaskTensors& h) { h.i32(0)[0] = 2; }, "mask.row_offsets",
       "row_offsets[0] = 2, expected 0"},
      {"csr decreasing", kCsr, [](HostMaskTensors& h) { h.i32(0)[7] = 3; }, "mask.row_offsets",
       "row_offsets[7] = 3 is less than row_offsets[6] = 240"},
      {"csr last offset", kCsr, [](HostMaskTensors& h) { h.i32(0)[30] = 1199; }, "mask.row_offsets",
       "row_offsets[30] = 1199 does not equal nnz = 1200"},
      {"csr huge offset", kCsr, [](HostMaskTensors& h) { h.i32(0)[12] = 1 << 30; }, "mask.row_offsets",
       "row_offsets[13] = 520 is less than row_offsets[12] = 1073741824"},
      {"csr col range", kCsr, [](HostMaskTensors& h) { h.i32(1)[415] = 40; }, "mask.col_indices",
       "col_indices[415] = 40 in row 10 (b_m = 0, h_m = 2, qb = 0) is outside [0, n_kvb = 40)"},
      {"csr col negative", kCsr, [](HostMaskTensors& h) { h.i32(1)[77] = -3; }, "mask.col_indices",
       "col_indices[77] = -3"},
      {"csr col order", kCsr, [](HostMaskTensors& h) { std::swap(h.i32(1)[500], h.i32(1)[501]); }, "mask.col_indices",
       "col_indices[501] = 20 in row 12 (b_m = 0, h_m = 2, qb = 2) is not greater than col_indices[500] = 21"},
      {"csr col repeat", kCsr, [](HostMaskTensors& h) { h.i32(1)[900] = h.i32(1)[899]; }, "mask.col_indices",
       "col_indices[900] = 19 in row 22"},
      {"csr two errors", kCsr, [](HostMaskTensors& h) { h.i32(1)[1000] = 99; h.i32(1)[20] = 99; }, "mask.col_indices",
       "col_indices[20] = 99"},
      {"lists count high", kList, [](HostMaskTensors& h) { h.i32(0)[13] = 43; }, "mask.counts",
       "counts of row 13 (b_m = 0, h_m = 2, qb = 3) = 43 is outside [0, K_max = 42]"},
      {"lists count negative", kList, [](HostMaskTensors& h) { h.i32(0)[29] = -1; }, "mask.counts",
       "= -1 is outside [0, K_max = 42]"},
      {"lists index range", kList, [](HostMaskTensors& h) { h.i32(1)[42 * 4 + 17] = 40; }, "mask.indices",
       "indices[17] = 40 of row 4"},
      {"lists duplicate", kList, [](HostMaskTensors& h) { h.i32(1)[42 * 9 + 3] = h.i32(1)[42 * 9 + 30]; },
       "mask.indices", "indices[30] = "},
      {"lists duplicate row", kList, [](HostMaskTensors& h) { h.i32(1)[42 * 9 + 3] = h.i32(1)[42 * 9 + 30]; },
       "mask.indices", "of row 9 (b_m = 0, h_m = 1, qb = 4) duplicates indices[3]"},
      {"lists counts before indices", kList, [](HostMaskTensors& h) { h.i32(1)[0] = -7; h.i32(0)[25] = 100; },
       "mask.counts", "counts of row 25"},
  };
}

}  // namespace tessera::testing
