// libFuzzer target: mask validation (validate_request, src/core/validate.cpp + mask_checks), mu(M)'s CPU builder
// (build_mask_state_cpu) on arbitrary dense / block-CSR / index-list masks, and behind it the CPU twins of every
// launch-preparation builder (prepare_plan_cpu: tile rows, traversal, work items, persistent work list; the
// row-aligned spread/compact pair) for a plan the input picks among the eligible ones.
//
// The input drives: the mask format and extents, the tensors' shapes, dtypes, strides and contents (buffers are
// sized from the tensors' own shapes, so a mask whose extents disagree with its tensors must be rejected before
// anything is read), the request's geometry and sizes, and the plan. Oracles: every error is a tessera::Error naming
// an argument (kInternal never); an accepted mask's mu(M) equals the set of active blocks the harness reads from the
// input itself, with counters equal to count_mask_csr; the prepared metadata pass check_tile_metadata, stay within
// prep_bounds, and survive spread_row_aligned + compact_row_aligned unchanged.
#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "core/catalog.hpp"
#include "core/launch_prep.hpp"
#include "core/request_plan.hpp"
#include "core/selector.hpp"
#include "fuzz_common.hpp"
#include "tessera/mask_state.hpp"
#include "tessera/request.hpp"

namespace {

using tessera::fuzz::fail;

/// Consumes the input from the front; zeros once it runs out.
struct Bytes {
  const std::uint8_t* p;
  std::size_t n;
  std::uint8_t u8() {
    if (!n) return 0;
    --n;
    return *p++;
  }
  std::uint32_t u32() { return u8() | (std::uint32_t(u8()) << 8) | (std::uint32_t(u8()) << 16) | (std::uint32_t(u8()) << 24); }
  std::int64_t pick(std::int64_t lo, std::int64_t hi) { return lo + std::int64_t(u8()) % (hi - lo + 1); }
  /// Usually a small value in [lo, hi]; rarely an edge value (negative, zero, huge).
  std::int64_t extent(std::int64_t lo, std::int64_t hi) {
    const std::uint8_t sel = u8();
    if (sel < 240) return lo + sel % (hi - lo + 1);
    static const std::int64_t edges[] = {0, -1, 1, 2, 1ll << 31, (1ll << 31) - 1, 1ll << 40, -(1ll << 62), 1ll << 62,
                                         65536, 3, 7, 17, 33, 100, 1000};
    return edges[sel - 240];
  }
};

constexpr std::int64_t kMaxElems = 1 << 16;

bool shape_ok(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) {
    if (s < 0 || s > kMaxElems) return false;
    n *= s;
    if (n > kMaxElems) return false;
  }
  return true;
}

/// Storage of one tensor: the view and the bytes behind it (sized from the view's shape and strides).
struct Owned {
  std::vector<std::uint8_t> bytes;
  tessera::TensorView view;
};

/// An int32 or byte tensor of `shape`, contiguous unless `strided` (then padded strides, possibly zero), filled
/// from the input: ints either in [lo, hi) or raw.
bool make_tensor(Bytes& in, Owned& t, std::vector<std::int64_t> shape, tessera::DType dtype, bool strided,
                 std::int64_t lo, std::int64_t hi) {
  if (!shape_ok(shape)) return false;
  const int rank = int(shape.size());
  std::array<std::int64_t, tessera::kMaxRank> stride{};
  std::int64_t st = 1;
  for (int d = rank - 1; d >= 0; --d) {
    stride[d] = st;
    st *= std::max<std::int64_t>(shape[d], 1);
  }
  if (strided) {
    // Per dimension: contiguous, padded (x2 / +1), transposed-ish or broadcast (0).
    std::int64_t s = 1;
    for (int d = rank - 1; d >= 0; --d) {
      switch (in.u8() % 4) {
        case 0: stride[d] = s; break;
        case 1: stride[d] = s + 1; break;
        case 2: stride[d] = 2 * s; break;
        case 3: stride[d] = 0; break;
      }
      s = std::max<std::int64_t>(stride[d], s) * std::max<std::int64_t>(shape[d], 1) + 1;
      if (s > kMaxElems) return false;
    }
  }
  std::int64_t extent = 1;  // largest element offset + 1
  for (int d = 0; d < rank; ++d)
    if (shape[d] == 0) extent = 0;
  if (extent) {
    extent = 0;
    for (int d = 0; d < rank; ++d) extent += (shape[d] - 1) * stride[d];
    ++extent;
  }
  if (extent > kMaxElems) return false;
  const std::size_t esz = tessera::dtype_size(dtype);
  t.bytes.assign(std::size_t(std::max<std::int64_t>(extent, 1)) * esz, 0);
  for (std::size_t i = 0; i < t.bytes.size() / esz; ++i) {
    if (esz == 4) {
      std::int32_t v;
      if (in.u8() < 230 && hi > lo) v = std::int32_t(lo + std::int64_t(in.u32() % std::uint64_t(hi - lo)));
      else v = std::int32_t(in.u32());
      std::memcpy(&t.bytes[i * 4], &v, 4);
    } else {
      const std::uint8_t b = in.u8();
      t.bytes[i] = dtype == tessera::DType::kBool ? (b < 250 ? (b & 1) : b) : (b < 128 ? 0 : b);
    }
  }
  t.view = tessera::make_tensor(t.bytes.data(), dtype, tessera::Device::kCpu,
                                std::span<const std::int64_t>(shape.data(), shape.size()));
  t.view.stride = stride;
  return true;
}

/// The active blocks of each row as the harness reads them from an accepted mask (independent of the library).
std::vector<std::vector<std::int32_t>> expected_rows(const tessera::BlockMask& m) {
  std::vector<std::vector<std::int32_t>> rows(std::size_t(m.rows()));
  const auto at32 = [](const tessera::TensorView& t, std::int64_t i) {
    return static_cast<const std::int32_t*>(t.data)[i];
  };
  if (m.format == tessera::MaskFormat::kDense) {
    const auto* b = static_cast<const std::uint8_t*>(m.dense.data);
    for (std::int64_t bm = 0; bm < m.batch; ++bm)
      for (std::int64_t h = 0; h < m.heads; ++h)
        for (std::int64_t q = 0; q < m.n_qb; ++q)
          for (std::int64_t k = 0; k < m.n_kvb; ++k) {
            const std::int64_t off =
                bm * m.dense.stride[0] + h * m.dense.stride[1] + q * m.dense.stride[2] + k * m.dense.stride[3];
            if (b[off]) rows[std::size_t((bm * m.heads + h) * m.n_qb + q)].push_back(std::int32_t(k));
          }
  } else if (m.format == tessera::MaskFormat::kBlockCsr) {
    for (std::int64_t r = 0; r < m.rows(); ++r)
      for (std::int32_t i = at32(m.row_offsets, r); i < at32(m.row_offsets, r + 1); ++i)
        rows[std::size_t(r)].push_back(at32(m.col_indices, i));
  } else {
    const std::int64_t kmax = m.indices.shape[3];
    for (std::int64_t r = 0; r < m.rows(); ++r) {
      for (std::int32_t i = 0; i < at32(m.counts, r); ++i) rows[std::size_t(r)].push_back(at32(m.indices, r * kmax + i));
      std::sort(rows[std::size_t(r)].begin(), rows[std::size_t(r)].end());
    }
  }
  return rows;
}

void check_state(const tessera::BlockMask& mask, const tessera::HostMaskState& st) {
  const auto rows = expected_rows(mask);
  if (st.row_offsets.size() != rows.size() + 1 || st.row_offsets[0] != 0) fail("mu(M): bad row_offsets extent");
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const std::vector<std::int32_t> got(st.col_indices.begin() + st.row_offsets[r],
                                        st.col_indices.begin() + st.row_offsets[r + 1]);
    if (got != rows[r]) fail("mu(M): row differs from the input's active blocks, row", std::to_string(r));
  }
  if (st.row_offsets.back() != std::int32_t(st.col_indices.size())) fail("mu(M): nnz mismatch");
  const tessera::MaskCounters c = tessera::count_mask_csr(st.shape, st.row_offsets.data(), st.col_indices.data());
  if (!(c == st.stats.counters)) fail("mu(M): counters differ from count_mask_csr");
  if (!(st.shape == tessera::MaskShape{mask.batch, mask.heads, mask.n_qb, mask.n_kvb})) fail("mu(M): shape");
}

/// How far inputs got (printed at exit when TESSERA_FUZZ_STATS is set): mu(M) built, request valid, metadata checked.
struct Stages {
  long inputs = 0, mask_ok = 0, request_ok = 0, prepared = 0;
  ~Stages() {
    if (std::getenv("TESSERA_FUZZ_STATS"))
      std::fprintf(stderr, "stages: inputs %ld, mu(M) built %ld, request valid %ld, metadata checked %ld\n", inputs,
                   mask_ok, request_ok, prepared);
  }
} stages;

bool expected_error(const tessera::Error& e) {
  tessera::fuzz::check_error(e);
  return e.code() == tessera::ErrorCode::kInvalidArgument || e.code() == tessera::ErrorCode::kUnsupported;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Bytes in{data, size};
  ++stages.inputs;
  const auto format = static_cast<tessera::MaskFormat>(in.u8() % 3);
  static const int kBlocks[] = {16, 32, 48, 64, 96, 128, 192, 256};
  const int block_q = kBlocks[in.u8() % 8], block_kv = kBlocks[in.u8() % 8];
  const std::int64_t bm = in.extent(1, 2), hm = in.extent(1, 3), n_qb = in.extent(0, 9), n_kvb = in.extent(0, 17);
  const bool strided = in.u8() & 1;
  const std::uint8_t corrupt = in.u8();  // which tensor shape to knock off its extent (most inputs: none)
  const auto off = [&](int which) -> std::int64_t { return (corrupt % 16) == which ? std::int64_t(corrupt / 16) - 8 : 0; };

  Owned a, b;
  tessera::BlockMask mask;
  try {
    if (format == tessera::MaskFormat::kDense) {
      const tessera::DType dt = (in.u8() & 1) ? tessera::DType::kBool
                                : (corrupt == 0xFF ? tessera::DType::kInt32 : tessera::DType::kUInt8);
      if (!make_tensor(in, a, {bm + off(1), hm + off(2), n_qb + off(3), n_kvb + off(4)}, dt, strided, 0, 2)) return 0;
      mask = tessera::BlockMask::from_dense(a.view);
    } else if (format == tessera::MaskFormat::kBlockCsr) {
      std::int64_t rows = 0;
      if (__builtin_mul_overflow(bm, hm, &rows) || __builtin_mul_overflow(rows, n_qb, &rows) || !shape_ok({rows}))
        return 0;
      // Row offsets: a non-decreasing walk (mostly), then the columns.
      std::vector<std::int64_t> shape_ro{rows + 1 + off(1)};
      if (!make_tensor(in, a, shape_ro, tessera::DType::kInt32, false, 0, 1)) return 0;
      auto* ro = reinterpret_cast<std::int32_t*>(a.bytes.data());
      const std::int64_t nro = std::max<std::int64_t>(shape_ro[0], 0);
      if (nro && in.u8() < 240) {
        std::int64_t acc = 0;
        for (std::int64_t i = 0; i < nro; ++i) {
          ro[i] = std::int32_t(acc);
          acc += std::min<std::int64_t>(std::max<std::int64_t>(n_kvb, 0), in.u8() % 5);
        }
      }
      const std::int64_t nnz = nro ? std::max<std::int64_t>(ro[nro - 1], 0) + off(2) : off(2);
      if (!make_tensor(in, b, {nnz}, tessera::DType::kInt32, false, 0, std::max<std::int64_t>(n_kvb, 1))) return 0;
      if (in.u8() < 200) {  // sort each row's columns strictly (duplicates removed by stepping), mostly valid
        auto* ci = reinterpret_cast<std::int32_t*>(b.bytes.data());
        for (std::int64_t r = 0; r + 1 < nro; ++r) {
          std::int32_t c = std::int32_t(in.u8() % 3);
          for (std::int64_t i = ro[r]; i < ro[r + 1] && i >= 0 && i < nnz; ++i) {
            ci[i] = c;
            c += 1 + in.u8() % 3;
          }
        }
      }
      mask = tessera::BlockMask::from_block_csr(a.view, b.view, bm, hm, n_qb, n_kvb);
    } else {
      const std::int64_t kmax = in.extent(0, 8);
      if (!make_tensor(in, a, {bm + off(1), hm + off(2), n_qb + off(3)}, tessera::DType::kInt32, false, 0,
                       std::max<std::int64_t>(kmax, 0) + 1))
        return 0;
      if (!make_tensor(in, b, {bm + off(4), hm + off(5), n_qb + off(6), kmax + off(7)}, tessera::DType::kInt32, false, 0,
                       std::max<std::int64_t>(n_kvb, 1)))
        return 0;
      if (in.u8() < 200 && b.view.rank == 4 && b.view.shape[3] > 0) {  // distinct indices per row, mostly valid
        auto* ix = reinterpret_cast<std::int32_t*>(b.bytes.data());
        const std::int64_t k = b.view.shape[3];
        for (std::int64_t r = 0; r < b.view.numel() / k; ++r) {
          std::int32_t c = std::int32_t(in.u8() % 3);
          for (std::int64_t i = 0; i < k; ++i) {
            ix[r * k + i] = c;
            c += 1 + in.u8() % 3;
          }
          if (k > 1 && (in.u8() & 1)) std::swap(ix[r * k], ix[r * k + k - 1]);
        }
      }
      mask = tessera::BlockMask::from_index_lists(a.view, b.view, n_kvb);
    }
  } catch (const tessera::Error& e) {
    if (!expected_error(e)) fail("a factory threw an unexpected error:", e.what());
    return 0;
  }
  // Extents changed after the factory (the struct is public): the checks must catch them too.
  if (corrupt >= 0xF0 && corrupt < 0xFF) {
    switch (corrupt & 3) {
      case 0: mask.n_kvb += 1; break;
      case 1: mask.n_qb = std::max<std::int64_t>(mask.n_qb - 1, 0); break;
      case 2: mask.heads += 1; break;
      case 3: mask.batch = -mask.batch; break;
    }
  }

  // mu(M) on its own.
  tessera::HostMaskState st;
  bool accepted = true;
  try {
    st = tessera::build_mask_state_cpu(mask);
  } catch (const tessera::Error& e) {
    if (!expected_error(e) || e.argument().rfind("mask", 0) != 0) fail("build_mask_state_cpu:", e.what());
    accepted = false;
  }
  if (accepted) {
    check_state(mask, st);
    ++stages.mask_ok;
  }

  // The request around it: validation, then mu(M), selection inputs and launch preparation.
  // Extents no request of this size can have: validation of such a mask is covered by build_mask_state_cpu above.
  if (mask.n_qb < 0 || mask.n_qb > 4096 || mask.n_kvb < 0 || mask.n_kvb > 4096 || mask.batch < 1 || mask.batch > 4 ||
      mask.heads < 1 || mask.heads > 8)
    return 0;
  const std::int64_t batch = mask.batch == 1 ? in.pick(1, 2) : mask.batch;
  const std::int64_t heads_q = mask.heads == 1 ? in.pick(1, 3) : mask.heads;
  const std::int64_t heads_kv = (heads_q % 2 == 0 && (in.u8() & 1)) ? heads_q / 2 : heads_q;
  const int head_dim = (in.u8() & 1) ? 128 : 64;
  std::int64_t n_q = mask.n_qb * block_q - in.pick(0, block_q - 1);
  std::int64_t n_kv = mask.n_kvb * block_kv - in.pick(0, block_kv - 1);
  if (in.u8() > 245) n_q += block_q;  // a request whose token count disagrees with the mask
  n_q = std::max<std::int64_t>(n_q, 0);
  n_kv = std::max<std::int64_t>(n_kv, 0);
  if (batch * n_q * heads_q > (1 << 22) || batch * n_kv * heads_kv > (1 << 22) || batch <= 0 || heads_q <= 0)
    return 0;
  tessera::AttentionRequest req;
  // Q/K/V/O are never read by validation: distinct fake addresses, far apart.
  const auto fake = [](std::uintptr_t i) { return reinterpret_cast<void*>(std::uintptr_t(1) << 40 | (i << 36)); };
  const tessera::DType dt = tessera::DType::kBFloat16;
  req.q = tessera::make_tensor(fake(1), dt, tessera::Device::kCpu, {batch, n_q, heads_q, head_dim});
  req.k = tessera::make_tensor(fake(2), dt, tessera::Device::kCpu, {batch, n_kv, heads_kv, head_dim});
  req.v = tessera::make_tensor(fake(3), dt, tessera::Device::kCpu, {batch, n_kv, heads_kv, head_dim});
  req.o = tessera::make_tensor(fake(4), dt, tessera::Device::kCpu, {batch, n_q, heads_q, head_dim});
  req.geometry = {block_q, block_kv};
  req.mask = mask;
  tessera::ProblemShape shape;
  try {
    shape = tessera::validate_request(req);
  } catch (const tessera::Error& e) {
    if (!expected_error(e)) fail("validate_request:", e.what());
    return 0;
  }
  if (!accepted) fail("validate_request accepts a mask build_mask_state_cpu rejects");
  ++stages.request_ok;

  tessera::EligibilityRequest er = tessera::eligibility_request(tessera::Arch::kSm90a, req, shape, dt);
  tessera::CandidateOptions opt;
  opt.splits = {1, 2, 4};
  opt.traversals = {tessera::Traversal::kAscending, tessera::Traversal::kDescending, tessera::Traversal::kRunMajor};
  const std::vector<tessera::Plan> plans = tessera::enumerate_plans(tessera::catalog(), er, opt);
  if (plans.empty()) return 0;
  tessera::Plan plan = plans[in.u32() % plans.size()];
  if (in.u8() & 1) {
    plan.org.group = int(in.pick(1, 4));
    plan.org.persistent = in.u8() & 1;
  }
  const tessera::PrepProblem problem = tessera::prep_problem(shape);
  tessera::HostTileMetadata md;
  try {
    md = tessera::prepare_plan_cpu(plan, st, problem);
  } catch (const tessera::Error& e) {
    if (!expected_error(e)) fail("prepare_plan_cpu:", e.what());
    return 0;
  }
  try {
    tessera::check_tile_metadata(md);
    const tessera::PrepBounds bounds = tessera::prep_bounds(plan, md.params, st.stats.counters.active_blocks, head_dim);
    if (std::int64_t(md.tile_row_offsets.size()) - 1 != bounds.tile_rows || md.n_entries() > bounds.entries ||
        std::int64_t(md.items.size()) > bounds.items || md.n_partials > bounds.partials ||
        std::int64_t(md.merge_targets.size()) > bounds.merges)
      fail("prepared metadata exceed prep_bounds for", tessera::plan_id(plan));
    tessera::HostTileMetadata spread = md;
    const std::vector<std::int32_t> ends = tessera::spread_row_aligned(spread, st.row_offsets, -7);
    tessera::compact_row_aligned(spread, ends);
    if (!(spread == md)) fail("spread_row_aligned + compact_row_aligned changed the metadata of", tessera::plan_id(plan));
    ++stages.prepared;
  } catch (const tessera::Error& e) {
    fail("prepared metadata fail their checks:", std::string(e.what()) + " plan " + tessera::plan_id(plan));
  }
  return 0;
}
