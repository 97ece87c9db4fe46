#pragma once
// Test helper: random logical block masks on the host, in each of the three formats (dense, block-CSR, index
// lists). A mask is first drawn as a bit array [B_m, H_m, n_qb, n_kvb] (1 = active), then encoded.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "tessera/mask.hpp"
#include "tessera/mask_state.hpp"

namespace tessera::testing {

/// How a random mask's active blocks are placed.
enum class MaskPattern {
  kRandom,      ///< each block active with probability `density`
  kEmpty,       ///< no active block
  kFull,        ///< every block active
  kSingle,      ///< exactly one active block (at a random position)
  kRuns,        ///< per row, runs of consecutive blocks (random lengths) covering about `density` of the row
  kRowDensity,  ///< each row draws its own density in [0, 2 * density] (so some rows are empty, some full)
};

/// Bit array [B_m, H_m, n_qb, n_kvb], row-major, of the given pattern.
inline std::vector<std::uint8_t> random_mask_bits(const MaskShape& s, MaskPattern p, double density,
                                                  std::mt19937_64& g) {
  std::vector<std::uint8_t> bits(static_cast<std::size_t>(s.total_blocks()), 0);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  switch (p) {
    case MaskPattern::kEmpty:
      break;
    case MaskPattern::kFull:
      std::fill(bits.begin(), bits.end(), 1);
      break;
    case MaskPattern::kSingle:
      if (!bits.empty()) bits[std::uniform_int_distribution<std::size_t>(0, bits.size() - 1)(g)] = 1;
      break;
    case MaskPattern::kRandom:
      for (auto& b : bits) b = u(g) < density ? 1 : 0;
      break;
    case MaskPattern::kRowDensity:
      for (std::int64_t r = 0; r < s.rows(); ++r) {
        const double d = std::min(1.0, 2.0 * density * u(g));
        for (std::int64_t j = 0; j < s.n_kvb; ++j) bits[r * s.n_kvb + j] = u(g) < d ? 1 : 0;
      }
      break;
    case MaskPattern::kRuns:
      for (std::int64_t r = 0; r < s.rows(); ++r) {
        std::int64_t j = 0;
        const double mean_run = 1.0 + 6.0 * u(g);
        while (j < s.n_kvb) {
          const auto len = static_cast<std::int64_t>(1 + u(g) * 2 * mean_run);
          const bool on = u(g) < density;
          for (std::int64_t k = j; k < std::min(s.n_kvb, j + len); ++k) bits[r * s.n_kvb + k] = on ? 1 : 0;
          j += len;
        }
      }
      break;
  }
  return bits;
}

/// A mask encoded in one format, owning its host buffers; `mask` views them. Move-only (moving keeps the views
/// valid because std::vector moves keep their storage).
struct HostMaskTensors {
  std::vector<unsigned char> buf[2];  ///< storage of the format's one or two tensors
  BlockMask mask;
  HostMaskTensors() = default;
  HostMaskTensors(HostMaskTensors&&) = default;
  HostMaskTensors& operator=(HostMaskTensors&&) = default;
  HostMaskTensors(const HostMaskTensors&) = delete;
  HostMaskTensors& operator=(const HostMaskTensors&) = delete;

  /// The views of slot 0 and 1 in `mask` (dense: dense/-; CSR: row_offsets/col_indices; lists: counts/indices).
  TensorView* slot(int i) {
    switch (mask.format) {
      case MaskFormat::kDense:
        return i == 0 ? &mask.dense : nullptr;
      case MaskFormat::kBlockCsr:
        return i == 0 ? &mask.row_offsets : &mask.col_indices;
      case MaskFormat::kIndexLists:
        return i == 0 ? &mask.counts : &mask.indices;
    }
    return nullptr;
  }
  std::int32_t* i32(int i) { return reinterpret_cast<std::int32_t*>(buf[i].data()); }
};

inline TensorView host_i32_view(std::vector<unsigned char>& buf, std::initializer_list<std::int64_t> shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  buf.assign(static_cast<std::size_t>(std::max<std::int64_t>(n, 1)) * 4, 0);
  return make_tensor(buf.data(), DType::kInt32, Device::kCpu, shape);
}

/// Dense encoding. `dtype` bool or u8; with `nonbinary` set, active bytes are random in [1, 255] (u8 only);
/// `pad` extra bytes after each row, `offset` bytes before the first element and a kv stride `kv_stride` (> 1:
/// interleaved garbage bytes) exercise strides and alignment.
inline HostMaskTensors encode_dense(const MaskShape& s, const std::vector<std::uint8_t>& bits,
                                    DType dtype = DType::kUInt8, std::mt19937_64* nonbinary = nullptr,
                                    std::int64_t pad = 0, std::int64_t offset = 0, std::int64_t kv_stride = 1) {
  HostMaskTensors t;
  const std::int64_t row_stride = s.n_kvb * kv_stride + pad;
  t.buf[0].assign(static_cast<std::size_t>(offset + s.rows() * row_stride + 1), 0xEE);  // padding bytes are garbage
  unsigned char* base = t.buf[0].data() + offset;
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    for (std::int64_t j = 0; j < s.n_kvb; ++j) {
      unsigned char v = bits[r * s.n_kvb + j];
      if (v && nonbinary && dtype == DType::kUInt8) v = static_cast<unsigned char>(1 + (*nonbinary)() % 255);
      base[r * row_stride + j * kv_stride] = v;
    }
  }
  TensorView v = make_strided_tensor(base, dtype, Device::kCpu, {s.batch, s.heads, s.n_qb, s.n_kvb},
                                     {s.heads * s.n_qb * row_stride, s.n_qb * row_stride, row_stride, kv_stride});
  t.mask = BlockMask::from_dense(v);
  return t;
}

/// Canonical block-CSR encoding.
inline HostMaskTensors encode_csr(const MaskShape& s, const std::vector<std::uint8_t>& bits) {
  HostMaskTensors t;
  std::vector<std::int32_t> off(1, 0), col;
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    for (std::int64_t j = 0; j < s.n_kvb; ++j) {
      if (bits[r * s.n_kvb + j]) col.push_back(static_cast<std::int32_t>(j));
    }
    off.push_back(static_cast<std::int32_t>(col.size()));
  }
  TensorView o = host_i32_view(t.buf[0], {s.rows() + 1});
  TensorView c = host_i32_view(t.buf[1], {static_cast<std::int64_t>(col.size())});
  std::memcpy(t.buf[0].data(), off.data(), off.size() * 4);
  if (!col.empty()) std::memcpy(t.buf[1].data(), col.data(), col.size() * 4);
  t.mask = BlockMask::from_block_csr(o, c, s.batch, s.heads, s.n_qb, s.n_kvb);
  return t;
}

/// Index-list encoding with K_max = max row count + `extra_k`; entries of a row shuffled when `shuffle` is given;
/// entries past a row's count are filled with `pad_value` (ignored by readers).
inline HostMaskTensors encode_index_lists(const MaskShape& s, const std::vector<std::uint8_t>& bits,
                                          std::int64_t extra_k = 0, std::mt19937_64* shuffle = nullptr,
                                          std::int32_t pad_value = -1) {
  HostMaskTensors t;
  std::int64_t k_max = 0;
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    std::int64_t n = 0;
    for (std::int64_t j = 0; j < s.n_kvb; ++j) n += bits[r * s.n_kvb + j];
    k_max = std::max(k_max, n);
  }
  k_max += extra_k;
  TensorView c = host_i32_view(t.buf[0], {s.batch, s.heads, s.n_qb});
  TensorView x = host_i32_view(t.buf[1], {s.batch, s.heads, s.n_qb, k_max});
  std::int32_t* cnt = t.i32(0);
  std::int32_t* idx = t.i32(1);
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    std::int32_t* row = idx + r * k_max;
    std::int64_t n = 0;
    for (std::int64_t j = 0; j < s.n_kvb; ++j) {
      if (bits[r * s.n_kvb + j]) row[n++] = static_cast<std::int32_t>(j);
    }
    if (shuffle) std::shuffle(row, row + n, *shuffle);
    for (std::int64_t k = n; k < k_max; ++k) row[k] = pad_value;
    cnt[r] = static_cast<std::int32_t>(n);
  }
  t.mask = BlockMask::from_index_lists(c, x, s.n_kvb);
  return t;
}

/// The expected canonical block-CSR of a bit array (row_offsets, col_indices).
inline std::pair<std::vector<std::int32_t>, std::vector<std::int32_t>> expected_csr(
    const MaskShape& s, const std::vector<std::uint8_t>& bits) {
  std::vector<std::int32_t> off(1, 0), col;
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    for (std::int64_t j = 0; j < s.n_kvb; ++j) {
      if (bits[r * s.n_kvb + j]) col.push_back(static_cast<std::int32_t>(j));
    }
    off.push_back(static_cast<std::int32_t>(col.size()));
  }
  return {off, col};
}

}  // namespace tessera::testing
