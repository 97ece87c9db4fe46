// build_mask_state_gpu() against build_mask_state_cpu(), bit for bit (block-CSR arrays and MaskStats), over random
// masks of all three formats; invalid device masks raise the CPU path's errors.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "device_mask.hpp"
#include "gpu_test_util.hpp"
#include "mask_corruptions.hpp"
#include "mask_gen.hpp"
#include "tessera/error.hpp"
#include "cuda/mask_state_workspace.hpp"
#include "tessera/mask_state_gpu.hpp"

namespace tessera {
namespace {

using namespace tessera::testing;

/// Builds on the GPU (reusing `ws` and `out`) and compares with the CPU builder on the host encoding.
void expect_same_state(HostMaskTensors& h, MaskStateWorkspace& ws, DeviceMaskState& out, const std::string& what) {
  const HostMaskState cpu = build_mask_state_cpu(h.mask);
  DeviceMaskCopy d = upload(h);
  build_mask_state_gpu(d.mask, nullptr, ws, out);
  const HostMaskState gpu = download_mask_state(out, nullptr);
  ASSERT_EQ(gpu.shape, cpu.shape) << what;
  ASSERT_EQ(out.nnz, static_cast<std::int64_t>(cpu.col_indices.size())) << what;
  ASSERT_EQ(gpu.row_offsets, cpu.row_offsets) << what;
  ASSERT_EQ(gpu.col_indices, cpu.col_indices) << what;
  ASSERT_EQ(gpu.stats.counters, cpu.stats.counters) << what;
  ASSERT_EQ(gpu.stats, cpu.stats) << what;
}

std::int64_t random_n_kvb(std::mt19937_64& g) {
  static const std::int64_t edges[] = {1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 255, 1023, 1024, 1025, 1182};
  if (g() % 3 == 0) return edges[g() % (sizeof(edges) / sizeof(edges[0]))];
  return 1 + static_cast<std::int64_t>(g() % 700);
}

TEST(MaskStateGpu, RandomMasksAllFormatsMatchCpuBitForBit) {
  TESSERA_REQUIRE_GPU();
  std::mt19937_64 g(0x7e55e7a);
  const MaskPattern patterns[] = {MaskPattern::kRandom, MaskPattern::kEmpty, MaskPattern::kFull,
                                  MaskPattern::kSingle, MaskPattern::kRuns, MaskPattern::kRowDensity};
  MaskStateWorkspace ws;
  DeviceMaskState out;
  int masks = 0;
  for (int it = 0; it < 1200; ++it) {
    const MaskShape s{1 + static_cast<std::int64_t>(g() % 3), 1 + static_cast<std::int64_t>(g() % 5),
                      1 + static_cast<std::int64_t>(g() % 24), random_n_kvb(g)};
    const MaskPattern p = patterns[g() % 6];
    const double density = std::uniform_real_distribution<double>(0, 1)(g);
    const auto bits = random_mask_bits(s, p, density, g);
    const std::string what = "it " + std::to_string(it) + " shape [" + std::to_string(s.batch) + "," +
                             std::to_string(s.heads) + "," + std::to_string(s.n_qb) + "," + std::to_string(s.n_kvb) +
                             "] pattern " + std::to_string(static_cast<int>(p)) + " density " + std::to_string(density);
    const DType dt = g() % 2 ? DType::kBool : DType::kUInt8;
    HostMaskTensors dense = encode_dense(s, bits, dt, &g, static_cast<std::int64_t>(g() % 20),
                                         static_cast<std::int64_t>(g() % 16), g() % 8 == 0 ? 3 : 1);
    expect_same_state(dense, ws, out, "dense " + what);
    HostMaskTensors csr = encode_csr(s, bits);
    expect_same_state(csr, ws, out, "csr " + what);
    HostMaskTensors lists = encode_index_lists(s, bits, static_cast<std::int64_t>(g() % 4), &g,
                                               static_cast<std::int32_t>(g() % 3 ? -1 : 1 << 30));
    expect_same_state(lists, ws, out, "lists " + what);
    if (HasFatalFailure()) return;
    masks += 3;
  }
  EXPECT_EQ(masks, 3600);
}

// The coarsened pair counts on their other paths: the one-thread-per-group merge (wide masks whose bitmap does
// not fit in shared memory) and the count after a pass 2 that was not speculated.
TEST(MaskStateGpu, CoarsenedPairsByMergeAndWithoutSpeculationMatchCpu) {
  TESSERA_REQUIRE_GPU();
  std::mt19937_64 g(0xc0a25e);
  for (const bool merge : {true, false}) {
    MaskStateWorkspace ws;
    ws.impl().coarsen_by_merge = merge;
    ws.impl().speculative_pass2 = merge;  // (merge, speculated) and (bitmap, pass 2 after the counters)
    DeviceMaskState out;
    for (int it = 0; it < 200; ++it) {
      const MaskShape s{1 + static_cast<std::int64_t>(g() % 2), 1 + static_cast<std::int64_t>(g() % 4),
                        1 + static_cast<std::int64_t>(g() % 40), random_n_kvb(g)};
      const MaskPattern p = g() % 2 ? MaskPattern::kRuns : MaskPattern::kRandom;
      const auto bits = random_mask_bits(s, p, std::uniform_real_distribution<double>(0, 1)(g), g);
      const std::string what = std::string(merge ? "merge" : "no speculation") + " it " + std::to_string(it);
      HostMaskTensors dense = encode_dense(s, bits);
      expect_same_state(dense, ws, out, "dense " + what);
      HostMaskTensors csr = encode_csr(s, bits);
      expect_same_state(csr, ws, out, "csr " + what);
      HostMaskTensors lists = encode_index_lists(s, bits, 1, &g);
      expect_same_state(lists, ws, out, "lists " + what);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(MaskStateGpu, Wan720pMaskMatchesCpu) {
  TESSERA_REQUIRE_GPU();
  std::mt19937_64 g(720);
  const MaskShape s{1, 40, 1182, 1182};
  const auto bits = random_mask_bits(s, MaskPattern::kRuns, 0.1, g);
  MaskStateWorkspace ws;
  DeviceMaskState out;
  HostMaskTensors dense = encode_dense(s, bits);
  expect_same_state(dense, ws, out, "wan dense");
  HostMaskTensors csr = encode_csr(s, bits);
  expect_same_state(csr, ws, out, "wan csr");
  HostMaskTensors lists = encode_index_lists(s, bits, 0, &g);
  expect_same_state(lists, ws, out, "wan lists");
}

TEST(MaskStateGpu, WideRowsUseLargeSharedMemoryBitmaps) {
  TESSERA_REQUIRE_GPU();
  std::mt19937_64 g(11);
  MaskStateWorkspace ws;
  DeviceMaskState out;
  for (std::int64_t n_kvb : {20000, 100000, 400000}) {
    const MaskShape s{1, 2, 3, n_kvb};
    const auto bits = random_mask_bits(s, MaskPattern::kRandom, 0.01, g);
    HostMaskTensors lists = encode_index_lists(s, bits, 2, &g);
    expect_same_state(lists, ws, out, "lists n_kvb " + std::to_string(n_kvb));
    HostMaskTensors dense = encode_dense(s, bits, DType::kUInt8, nullptr, 0, 5);
    expect_same_state(dense, ws, out, "dense n_kvb " + std::to_string(n_kvb));
  }
}

TEST(MaskStateGpu, ConvenienceOverloadMatchesCpu) {
  TESSERA_REQUIRE_GPU();
  std::mt19937_64 g(5);
  const MaskShape s{2, 1, 7, 45};
  const auto bits = random_mask_bits(s, MaskPattern::kRandom, 0.3, g);
  HostMaskTensors lists = encode_index_lists(s, bits, 1, &g);
  const HostMaskState cpu = build_mask_state_cpu(lists.mask);
  DeviceMaskCopy d = upload(lists);
  const DeviceMaskState st = build_mask_state_gpu(d.mask, nullptr);
  const HostMaskState gpu = download_mask_state(st, nullptr);
  EXPECT_EQ(gpu.row_offsets, cpu.row_offsets);
  EXPECT_EQ(gpu.col_indices, cpu.col_indices);
  EXPECT_EQ(gpu.stats, cpu.stats);
}

/// Expects the CPU and the GPU builders to raise the same error on `h` (corrupted host encoding).
void expect_same_error(HostMaskTensors& h, const char* argument, const char* fragment) {
  std::string cpu_what;
  try {
    build_mask_state_cpu(h.mask);
    ADD_FAILURE() << "CPU: no error for " << fragment;
    return;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.argument(), argument);
    EXPECT_NE(e.message().find(fragment), std::string::npos) << e.what();
    cpu_what = e.what();
  }
  DeviceMaskCopy d = upload(h);
  try {
    build_mask_state_gpu(d.mask, nullptr);
    ADD_FAILURE() << "GPU: no error for " << cpu_what;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), cpu_what);
  }
}

TEST(MaskStateGpu, InvalidDeviceMasksRaiseTheCpuErrors) {
  TESSERA_REQUIRE_GPU();
  for (const MaskCorruption& c : mask_corruptions()) {
    SCOPED_TRACE(c.name);
    HostMaskTensors h = corruption_base(c.format);
    c.corrupt(h);
    expect_same_error(h, c.argument, c.fragment);
  }
}

TEST(MaskStateGpu, HostMaskRejected) {
  TESSERA_REQUIRE_GPU();
  std::mt19937_64 g(1);
  const MaskShape s{1, 1, 2, 2};
  HostMaskTensors h = encode_dense(s, random_mask_bits(s, MaskPattern::kFull, 1.0, g));
  try {
    build_mask_state_gpu(h.mask, nullptr);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.argument(), "mask");
  }
}

}  // namespace
}  // namespace tessera
