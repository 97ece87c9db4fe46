// GPU launch-preparation builders vs their CPU twins, bit for bit, on >= 1,000 random masks and plans.
#include <array>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "core/launch_prep.hpp"
#include "cuda/check.cuh"
#include "core/row_builder_choice.hpp"
#include "cuda/launch_prep_gpu.hpp"
#include "cuda/launch_prep_kernels.cuh"
#include "gpu_test_util.hpp"
#include "plan_test_util.hpp"
#include "tessera/geometry.hpp"

namespace tessera {
namespace {

std::string first_difference(const HostTileMetadata& a, const HostTileMetadata& b) {
  if (a.tile_row_offsets != b.tile_row_offsets) return "tile_row_offsets";
  if (a.kv_tile != b.kv_tile) return "kv_tile";
  if (a.member != b.member) return "member";
  if (a.gather_blocks != b.gather_blocks) return "gather_blocks";
  if (a.items.size() != b.items.size()) return "items.size";
  for (std::size_t i = 0; i < a.items.size(); ++i) {
    const WorkItem &x = a.items[i], &y = b.items[i];
    if (x.batch != y.batch || x.head != y.head || x.q_start != y.q_start || x.q_len != y.q_len ||
        x.entry_begin != y.entry_begin || x.entry_end != y.entry_end || x.tile_row != y.tile_row ||
        x.partial != y.partial)
      return "items[" + std::to_string(i) + "]";
  }
  if (a.merge_offsets != b.merge_offsets) return "merge_offsets";
  if (a.merge_targets.size() != b.merge_targets.size()) return "merge_targets.size";
  if (a.n_partials != b.n_partials) return "n_partials";
  return a == b ? "" : "scalars";
}

DimMapping random_mapping(std::mt19937_64& g, bool kv, int& block) {
  const int kind = std::uniform_int_distribution<int>(0, kv ? 3 : 2)(g);
  const int factor = 1 << std::uniform_int_distribution<int>(1, 3)(g);
  // Refined factors include 3 and 6 (B = 384 on 128- or 64-token tiles, as the catalog refines STA blocks).
  const int refine_factors[] = {2, 3, 4, 6, 8};
  const int refine = refine_factors[std::uniform_int_distribution<int>(0, 4)(g)];
  switch (kind) {
    case 0: block = 16 * std::uniform_int_distribution<int>(1, 4)(g); return {MappingKind::kDirect, 1};
    case 1: block = 16 * std::uniform_int_distribution<int>(1, 2)(g); return {MappingKind::kCoarsen, factor};
    case 2: block = 16 * refine * std::uniform_int_distribution<int>(1, 2)(g); return {MappingKind::kRefine, refine};
    default: block = 16 * std::uniform_int_distribution<int>(1, 2)(g); return {MappingKind::kPacked, factor};
  }
}

// Random plan organization: group, persistent, traversal, split (every split 1..64: the split-KV item builder
// stages fewer query tiles per CTA from split 8 on).
void random_org(std::mt19937_64& g, Plan& plan) {
  plan.org.group = 1 + static_cast<int>(g() % 4);
  plan.org.persistent = g() % 3 == 0;
  plan.org.traversal = static_cast<Traversal>(g() % 3);
  plan.org.split = 1 << (g() % 7);
}

// Random plan: q and kv mappings (with their block sizes) and organization.
Plan random_plan(std::mt19937_64& g) {
  Plan plan;
  plan.head_dim = 64;
  plan.q = random_mapping(g, false, plan.block_q);
  plan.kv = random_mapping(g, true, plan.block_kv);
  random_org(g, plan);
  return plan;
}

// Random problem: B <= 2, H_kv <= 2, H_q <= 3 H_kv, N_q in [n_q_min, n_q_min + n_q_span), N_kv in [1, n_kv_span].
PrepProblem random_problem(std::mt19937_64& g, std::int64_t n_q_min, std::int64_t n_q_span, std::int64_t n_kv_span) {
  PrepProblem pr;
  pr.batch = 1 + static_cast<std::int64_t>(g() % 2);
  pr.heads_kv = 1 + static_cast<std::int64_t>(g() % 2);
  pr.heads_q = pr.heads_kv * (1 + static_cast<std::int64_t>(g() % 3));
  pr.n_q = n_q_min + static_cast<std::int64_t>(g() % n_q_span);
  pr.n_kv = 1 + static_cast<std::int64_t>(g() % n_kv_span);
  pr.head_dim = 64;
  return pr;
}

// Whether the decoupled look-back state of `md` (statuses and counters) is all zero, as every builder launch must
// leave it.
bool lookback_state_is_zero(const DeviceTileMetadata& md) {
  std::vector<std::uint64_t> words(md.lookback.bytes() / sizeof(std::uint64_t));
  if (!words.empty())
    TESSERA_CUDA_CHECK(cudaMemcpy(words.data(), md.lookback.data(), words.size() * sizeof(std::uint64_t),
                                  cudaMemcpyDeviceToHost));
  return std::all_of(words.begin(), words.end(), [](std::uint64_t w) { return w == 0; });
}

// The tile-row builder of test iteration i: streaming, persistent, automatic in turn.
prep::RowBuilder builder(int i) {
  return std::array{prep::RowBuilder::kStreaming, prep::RowBuilder::kPersistent, prep::RowBuilder::kAuto}[i % 3];
}

// The layout check of a GPU result `dev` for mu(M) `ms` (tile-row builder `rb`): "" when right. kAuto must write the
// row-aligned layout exactly where the plan allows it (prep::prefer_row_aligned and the builder), the other builders
// the compact one; a row-aligned result's raw offsets must be the positions spread_row_aligned gives (row t at
// r_kv times mu(M)'s offset of its first logical row), its ends inside their spans (download checks that too).
std::string layout_problem(const DeviceTileMetadata& dev, const HostMaskState& ms, const HostTileMetadata& cpu,
                           prep::RowBuilder rb) {
  const prep::PrepParams& p = dev.params;
  const bool expect = rb == prep::RowBuilder::kAuto && prep::row_aligned_gpu(p);
  if (dev.row_aligned != expect) return std::string("row_aligned ") + (dev.row_aligned ? "set" : "not set");
  if (!dev.row_aligned) return dev.view().tile_row_ends == nullptr ? "" : "tile_row_ends set for a compact layout";
  if (dev.view().tile_row_ends == nullptr) return "tile_row_ends null";
  std::vector<std::int32_t> raw(static_cast<std::size_t>(p.tile_rows() + 1));
  TESSERA_CUDA_CHECK(cudaMemcpy(raw.data(), dev.row_offsets_ptr, raw.size() * 4, cudaMemcpyDeviceToHost));
  HostTileMetadata spread = cpu;
  spread_row_aligned(spread, ms.row_offsets, 0);
  if (raw != spread.tile_row_offsets) return "row-aligned offsets differ from the spread positions";
  if (dev.n_entries != spread.tile_row_offsets.back()) return "n_entries is not the row-aligned extent";
  return "";
}

// Prepares `plan` for mask `dm` on the CPU and on the GPU (into `dev`, with tile-row builder `rb`); the first
// difference, "" when identical (and "lookback state" when the GPU left its look-back state nonzero).
std::string gpu_vs_cpu(const Plan& plan, const plan_testing::DenseBlockMask& dm, const PrepProblem& pr,
                       DeviceTileMetadata& dev, prep::RowBuilder rb = prep::RowBuilder::kAuto) {
  const HostMaskState ms = plan_testing::host_mask_state(dm);
  const HostTileMetadata cpu = prepare_plan_cpu(plan, ms, pr);
  const DeviceMaskState dms = upload_mask_state(ms, nullptr);
  dev.row_builder = rb;
  prepare_plan_gpu(plan, dms, pr, nullptr, dev);
  const std::string diff = first_difference(download_tile_metadata(dev, nullptr), cpu);
  if (!diff.empty()) return diff;
  const std::string layout = layout_problem(dev, ms, cpu, rb);
  if (!layout.empty()) return layout;
  return lookback_state_is_zero(dev) ? "" : "lookback state";
}

TEST(LaunchPrepGpu, MatchesCpuTwinsBitForBitOnRandomMasks) {
  TESSERA_REQUIRE_GPU();
  std::mt19937_64 g(0x7e55e7a);
  DeviceTileMetadata reused;
  const double densities[] = {0.0, 0.02, 0.1, 0.3, 0.6, 1.0};
  int checked = 0, aligned = 0;
  for (int iter = 0; iter < 1200; ++iter) {
    const Plan plan = random_plan(g);
    const PrepProblem pr = random_problem(g, 1, 700, 900);
    const std::int64_t bm = g() % 2 ? pr.batch : 1, hm = g() % 2 ? pr.heads_q : 1;
    const auto dm = plan_testing::random_mask(bm, hm, num_blocks(pr.n_q, plan.block_q), num_blocks(pr.n_kv, plan.block_kv),
                                         densities[g() % std::size(densities)], g());
    const HostMaskState ms = plan_testing::host_mask_state(dm);
    SCOPED_TRACE("iter " + std::to_string(iter) + " plan " + plan_id(plan));
    const HostTileMetadata cpu = prepare_plan_cpu(plan, ms, pr);
    const DeviceMaskState dms = upload_mask_state(ms, nullptr);
    DeviceTileMetadata fresh;
    DeviceTileMetadata& dev = iter % 2 ? reused : fresh;
    // Both streaming tile-row kernels and the automatic choice, fresh and reused.
    dev.row_builder = builder(iter / 2);
    // Every third request as the Runtime prepares it: unsplit plans get implicit work items (no list is built;
    // download_tile_metadata computes them as the kernels do, from the tile-row offsets).
    const bool implicit = iter % 3 == 0;
    enqueue_prepare_plan_gpu(plan, dms, pr, nullptr, dev, implicit);
    finish_prepare_plan_gpu(dev, nullptr);
    const bool unsplit = plan.org.split == 1 && !plan.org.persistent && plan.org.group == 1;
    ASSERT_EQ(dev.implicit_items, implicit && unsplit);
    ASSERT_EQ(dev.view().items == nullptr, implicit && unsplit);
    const HostTileMetadata gpu = download_tile_metadata(dev, nullptr);
    ASSERT_EQ(first_difference(gpu, cpu), "");
    ASSERT_EQ(layout_problem(dev, ms, cpu, dev.row_builder), "");
    aligned += dev.row_aligned ? 1 : 0;
    ASSERT_EQ(dev.view().n_items, static_cast<std::int32_t>(cpu.items.size()));
    ASSERT_TRUE(lookback_state_is_zero(dev));
    ++checked;
  }
  EXPECT_GE(checked, 1000);
  EXPECT_GE(aligned, 150);  // every third request is kAuto, most of those with offsets of their own
}

// Long kv rows: several 1,024-block windows of the GPU tile-row builder, windows skipped by sparse rows, full
// windows (density 1), runs longer than a warp (run-major), ragged refined tails, broadcast mask extents.
TEST(LaunchPrepGpu, LongRowsMatchCpuTwinsBitForBit) {
  TESSERA_REQUIRE_GPU();
  std::mt19937_64 g(0x10ad5);
  const double densities[] = {0.0005, 0.003, 0.05, 0.4, 1.0};
  DeviceTileMetadata reused;
  for (int iter = 0; iter < 120; ++iter) {
    const Plan plan = random_plan(g);
    PrepProblem pr;
    pr.batch = 1 + static_cast<std::int64_t>(g() % 2);
    pr.heads_kv = 1;
    pr.heads_q = 1 + static_cast<std::int64_t>(g() % 2);
    pr.n_q = 1 + static_cast<std::int64_t>(g() % 300);
    pr.n_kv = 16 * 1000 + static_cast<std::int64_t>(g() % (16 * 4000));
    pr.head_dim = 64;
    const std::int64_t bm = g() % 2 ? pr.batch : 1, hm = g() % 2 ? pr.heads_q : 1;
    const auto dm = plan_testing::random_mask(bm, hm, num_blocks(pr.n_q, plan.block_q),
                                              num_blocks(pr.n_kv, plan.block_kv),
                                              densities[g() % std::size(densities)], g());
    SCOPED_TRACE("iter " + std::to_string(iter) + " plan " + plan_id(plan));
    ASSERT_EQ(gpu_vs_cpu(plan, dm, pr, reused, builder(iter)), "");
  }
}

// Each logical row gets its own density (empty, sparse, dense or full rows side by side).
plan_testing::DenseBlockMask mixed_rows_mask(std::int64_t b, std::int64_t h, std::int64_t q, std::int64_t k,
                                             std::mt19937_64& g) {
  plan_testing::DenseBlockMask m(b, h, q, k);
  const double densities[] = {0.0, 0.0, 0.01, 0.1, 0.5, 1.0};
  for (std::int64_t bi = 0; bi < b; ++bi)
    for (std::int64_t hi = 0; hi < h; ++hi)
      for (std::int64_t qi = 0; qi < q; ++qi) {
        std::bernoulli_distribution d(densities[g() % std::size(densities)]);
        for (std::int64_t ki = 0; ki < k; ++ki) m.at(bi, hi, qi, ki) = d(g) ? 1 : 0;
      }
  return m;
}

// Many tile rows and query tiles: the single-pass builders' decoupled look-back spans hundreds to thousands of
// CTAs (several 32-CTA look-back windows, CTAs whose rows are all empty, the last CTA partly filled), and the
// object is reused across sizes (the look-back state must be left zero by every launch).
TEST(LaunchPrepGpu, ManyRowsMatchCpuTwinsBitForBit) {
  TESSERA_REQUIRE_GPU();
  std::mt19937_64 g(0x5ca7);
  DeviceTileMetadata reused;
  for (int iter = 0; iter < 60; ++iter) {
    const Plan plan = random_plan(g);
    const PrepProblem pr = random_problem(g, 2000, 60000, 1500);
    const std::int64_t bm = g() % 2 ? pr.batch : 1, hm = g() % 2 ? pr.heads_q : 1;
    const auto dm = mixed_rows_mask(bm, hm, num_blocks(pr.n_q, plan.block_q), num_blocks(pr.n_kv, plan.block_kv), g);
    SCOPED_TRACE("iter " + std::to_string(iter) + " plan " + plan_id(plan));
    ASSERT_EQ(gpu_vs_cpu(plan, dm, pr, reused, builder(iter)), "");
  }
}

// Very long kv rows (n_kvb 24,600 - 32,600): c_q = 1 on the streaming builder (any length); c_q = 2 on the
// single-pass bitmap builder (up to 32,608 bytes of bitmaps); c_q = 4, 8 beyond its shared-memory bitmaps
// (4 * c_q * ceil(n_kvb / 32) words > 32 KB): the two-pass builder.
TEST(LaunchPrepGpu, VeryLongRowsMatchCpuTwinsBitForBit) {
  TESSERA_REQUIRE_GPU();
  std::mt19937_64 g(0x1049);
  const double densities[] = {0.0003, 0.002, 0.02};
  DeviceTileMetadata reused;
  for (int iter = 0; iter < 24; ++iter) {
    Plan plan;
    plan.head_dim = 64;
    const int c_q = 1 << (iter % 4);  // 1, 2, 4, 8
    plan.block_q = 16;
    plan.q = c_q == 1 ? DimMapping{MappingKind::kDirect, 1} : DimMapping{MappingKind::kCoarsen, c_q};
    plan.kv = random_mapping(g, true, plan.block_kv);
    random_org(g, plan);
    PrepProblem pr;
    pr.batch = 1;
    pr.heads_kv = 1;
    pr.heads_q = 1 + static_cast<std::int64_t>(g() % 2);
    pr.n_q = 1 + static_cast<std::int64_t>(g() % 400);
    pr.n_kv = static_cast<std::int64_t>(plan.block_kv) * (24600 + static_cast<std::int64_t>(g() % 8000));
    pr.head_dim = 64;
    const auto dm = plan_testing::random_mask(1, pr.heads_q, num_blocks(pr.n_q, plan.block_q),
                                              num_blocks(pr.n_kv, plan.block_kv),
                                              densities[g() % std::size(densities)], g());
    SCOPED_TRACE("iter " + std::to_string(iter) + " plan " + plan_id(plan));
    ASSERT_EQ(gpu_vs_cpu(plan, dm, pr, reused, builder(iter / 4)), "");  // c_q = 1 every way
  }
}

// Rows made of runs of consecutive kv blocks: lengths from 1 to over a warp and over a thousand, gaps from 1 (two runs
// one block apart) to long; each logical row picks its own mix (empty rows included).
plan_testing::DenseBlockMask runs_mask(std::int64_t b, std::int64_t h, std::int64_t q, std::int64_t k,
                                       std::mt19937_64& g) {
  plan_testing::DenseBlockMask m(b, h, q, k);
  const std::int64_t lengths[] = {1, 1, 2, 3, 5, 8, 31, 32, 33, 64, 100, 1500};
  const std::int64_t gaps[] = {1, 1, 2, 7, 40, 300};
  for (std::int64_t bi = 0; bi < b; ++bi)
    for (std::int64_t hi = 0; hi < h; ++hi)
      for (std::int64_t qi = 0; qi < q; ++qi) {
        if (g() % 8 == 0) continue;  // empty row
        const std::size_t max_len = 1 + g() % std::size(lengths), max_gap = 1 + g() % std::size(gaps);
        std::int64_t ki = static_cast<std::int64_t>(g() % 3);
        while (ki < k) {
          const std::int64_t len = lengths[g() % max_len];
          for (std::int64_t j = ki; j < std::min(k, ki + len); ++j) m.at(bi, hi, qi, j) = 1;
          ki += len + gaps[g() % max_gap];
        }
      }
  return m;
}

// The builders of the two plans furthest from the launch-preparation target: packed KV with c_q > 1 (single-pass
// bitmap builder: one unit per lane, membership OR-ed over an entry's lanes and carried across rounds and 1,024-block
// stretches) in every traversal, and run-major traversal with c_q == 1 (written by the streaming builder itself:
// run tables in shared memory when a CTA's columns are staged, in global scratch when not, Direct KV without a
// look-back and the other KV forms with one) besides run-major with c_q > 1 (reorder pass). Rows of runs: runs
// longer than a warp and than a stretch, runs one block apart, ragged Refined-KV tails (n_kv not a multiple of the
// tile), 32-row CTAs over the 4,096 staged columns, packed entries straddling rounds.
TEST(LaunchPrepGpu, PackedCoarsenedQAndRunMajorMatchCpuTwinsBitForBit) {
  TESSERA_REQUIRE_GPU();
  std::mt19937_64 g(0x2b0a7);
  DeviceTileMetadata reused;
  int packed_cq = 0, run_major_cq1 = 0;
  for (int iter = 0; iter < 160; ++iter) {
    Plan plan;
    plan.head_dim = 64;
    const bool packed = iter % 2 == 0;
    const int c_q = packed ? 2 << (g() % 3) : (g() % 4 == 0 ? 2 << (g() % 3) : 1);
    plan.block_q = 16;
    plan.q = c_q == 1 ? DimMapping{MappingKind::kDirect, 1} : DimMapping{MappingKind::kCoarsen, c_q};
    do {
      plan.kv = random_mapping(g, true, plan.block_kv);
    } while (packed && plan.kv.kind != MappingKind::kPacked);
    random_org(g, plan);
    if (!packed) plan.org.traversal = Traversal::kRunMajor;
    PrepProblem pr;
    pr.batch = 1;
    pr.heads_kv = 1;
    pr.heads_q = 1 + static_cast<std::int64_t>(g() % 2);
    const bool wide = iter % 3 == 0;  // rows of 1,000-4,000 blocks: CTAs over the staged columns, several stretches
    const std::int64_t q_blocks = wide ? 20 + static_cast<std::int64_t>(g() % 200)
                                       : 100 + static_cast<std::int64_t>(g() % 3000);
    const std::int64_t kv_blocks = wide ? 1000 + static_cast<std::int64_t>(g() % 3000)
                                        : 1 + static_cast<std::int64_t>(g() % 400);
    pr.n_q = q_blocks * plan.block_q - static_cast<std::int64_t>(g() % plan.block_q);
    pr.n_kv = kv_blocks * plan.block_kv - static_cast<std::int64_t>(g() % plan.block_kv);  // ragged last block
    pr.head_dim = 64;
    const auto dm = runs_mask(1, pr.heads_q, num_blocks(pr.n_q, plan.block_q), num_blocks(pr.n_kv, plan.block_kv), g);
    SCOPED_TRACE("iter " + std::to_string(iter) + " plan " + plan_id(plan));
    ASSERT_EQ(gpu_vs_cpu(plan, dm, pr, reused, builder(iter)), "");
    packed_cq += packed;
    run_major_cq1 += !packed && c_q == 1;
  }
  EXPECT_EQ(packed_cq, 80);
  EXPECT_GE(run_major_cq1, 40);
}

// Run-major with Direct KV (launch_prep_run_major_direct.cuh: a counting sort of each row's runs by length, its own
// kernel instance): Direct Q (mu(M)'s offsets, no look-back) and Refined Q by 2 (look-back), rows of runs (lengths
// 1-1,500, so the histogram, the longest-run case and the warp-written runs are all reached) and uniform random rows
// of densities 0.02-1 (rows that are one run), narrow rows and wide ones (CTAs over the 4,096 staged columns: run
// tables in global scratch).
TEST(LaunchPrepGpu, DirectKvRunMajorMatchesCpuTwinsBitForBit) {
  TESSERA_REQUIRE_GPU();
  std::mt19937_64 g(0xd1ec7);
  DeviceTileMetadata reused;
  for (int iter = 0; iter < 48; ++iter) {
    Plan plan;
    plan.head_dim = 64;
    const bool refine_q = iter % 4 == 3;
    plan.q = refine_q ? DimMapping{MappingKind::kRefine, 2} : DimMapping{MappingKind::kDirect, 1};
    plan.block_q = refine_q ? 32 : 16;
    plan.kv = DimMapping{MappingKind::kDirect, 1};
    plan.block_kv = 16 * (1 + static_cast<int>(g() % 4));
    random_org(g, plan);
    plan.org.traversal = Traversal::kRunMajor;
    const bool wide = iter % 3 == 0;
    const std::int64_t q_blocks = wide ? 20 + static_cast<std::int64_t>(g() % 200)
                                       : 100 + static_cast<std::int64_t>(g() % 3000);
    const std::int64_t kv_blocks = wide ? 1000 + static_cast<std::int64_t>(g() % 3000)
                                        : 1 + static_cast<std::int64_t>(g() % 400);
    PrepProblem pr;
    pr.batch = 1;
    pr.heads_kv = 1;
    pr.heads_q = 1 + static_cast<std::int64_t>(g() % 2);
    pr.n_q = q_blocks * plan.block_q - static_cast<std::int64_t>(g() % plan.block_q);
    pr.n_kv = kv_blocks * plan.block_kv - static_cast<std::int64_t>(g() % plan.block_kv);
    pr.head_dim = 64;
    const std::int64_t nq = num_blocks(pr.n_q, plan.block_q), nk = num_blocks(pr.n_kv, plan.block_kv);
    plan_testing::DenseBlockMask dm = runs_mask(1, pr.heads_q, nq, nk, g);
    if (iter % 2 == 1) {  // uniform random rows instead
      const double densities[] = {0.02, 0.1, 0.3, 0.7, 1.0};
      const double d = densities[g() % std::size(densities)];
      std::bernoulli_distribution on(d);
      for (std::int64_t hi = 0; hi < pr.heads_q; ++hi)
        for (std::int64_t qi = 0; qi < nq; ++qi)
          for (std::int64_t ki = 0; ki < nk; ++ki) dm.at(0, hi, qi, ki) = on(g) ? 1 : 0;
    }
    SCOPED_TRACE("iter " + std::to_string(iter) + " plan " + plan_id(plan));
    ASSERT_EQ(gpu_vs_cpu(plan, dm, pr, reused, prep::RowBuilder::kStreaming), "");
    ASSERT_EQ(gpu_vs_cpu(plan, dm, pr, reused, prep::RowBuilder::kAuto), "");
  }
}

TEST(LaunchPrepGpu, WanSizedMaskMatchesCpu) {
  TESSERA_REQUIRE_GPU();
  // Wan2.1 720p geometry at B = 64: N = 75,600 tokens, 1,182 blocks per side; a few heads to keep the CPU fast.
  const std::int64_t n = 75600, nb = num_blocks(n, 64);
  const auto dm = plan_testing::random_mask(1, 4, nb, nb, 0.1, 1234);
  const HostMaskState ms = plan_testing::host_mask_state(dm);
  const DeviceMaskState dms = upload_mask_state(ms, nullptr);
  const PrepProblem pr{1, 4, 4, n, n, 128};
  for (const char* id : {"sm90a.mma.bf16.d128.q64d.kv64d.g1.tasc.split1.s2.w4",
                         "sm90a.mma.bf16.d128.q64c2.kv64c2.g1.trun.split4.s2.w4",
                         "sm90a.mma.bf16.d128.q64d.kv64d.g1.trun.split1.s2.w4",
                         "sm90a.mma.bf16.d128.q64d.kv64p2.g1.trun.split1.s2.w4",
                         "sm90a.mma.bf16.d128.q64c2.kv64p2.g1.tasc.split1.s2.w4",
                         "sm90a.mma.bf16.d128.q64c8.kv64p4.g1.tdesc.split1.s2.w4",
                         "sm90a.mma.bf16.d128.q64r4.kv64p4.g2p.tdesc.split2.s2.w4",
                         "sm90a.mma.bf16.d128.q64d.kv64r2.g1p.tasc.split8.s2.w4"}) {
    const Plan plan = parse_plan_id(id);
    const HostTileMetadata cpu = prepare_plan_cpu(plan, ms, pr);
    for (const bool persistent_rows : {false, true}) {
      SCOPED_TRACE(std::string(id) + (persistent_rows ? " persistent rows" : ""));
      DeviceTileMetadata dev;
      dev.row_builder = persistent_rows ? prep::RowBuilder::kPersistent : prep::RowBuilder::kStreaming;
      prepare_plan_gpu(plan, dms, pr, nullptr, dev);
      ASSERT_EQ(first_difference(download_tile_metadata(dev, nullptr), cpu), "");
      ASSERT_TRUE(lookback_state_is_zero(dev));
    }
  }
}

// The persistent streaming tile-row builder (RowBuilder::kPersistent) where it runs: c_q = 1
// (Direct or Refined Q) with Coarsened, packed or Refined KV. Up to ~150,000 tile rows (several thousand 30-row
// tickets: many per resident CTA, so every CTA goes through its pipeline several times), rows of mixed density (empty
// tickets, staged tickets, and on wide rows tickets over the 8,192 staged columns that read global memory), every
// traversal. One object is reused and alternates the persistent and the one-CTA-per-ticket kernel: both must match
// the CPU twins bit for bit, and each launch must leave the look-back state zero (a ticket counter left behind would
// shift every later launch's tickets).
TEST(LaunchPrepGpu, PersistentRowBuilderMatchesCpuTwinsBitForBit) {
  TESSERA_REQUIRE_GPU();
  std::mt19937_64 g(0x9e75157);
  DeviceTileMetadata reused;
  for (int iter = 0; iter < 12; ++iter) {
    Plan plan;
    plan.head_dim = 64;
    const bool refine_q = iter % 3 == 2;
    plan.q = refine_q ? DimMapping{MappingKind::kRefine, 2} : DimMapping{MappingKind::kDirect, 1};
    plan.block_q = refine_q ? 32 : 16;
    do {
      plan.kv = random_mapping(g, true, plan.block_kv);
    } while (plan.kv.kind == MappingKind::kDirect);  // Direct KV keeps mu(M)'s offsets: no look-back
    random_org(g, plan);
    const bool wide = iter % 2 == 1;  // wide rows: 30 rows x ~0.27 x 600-1,100 blocks, around 8,192 columns
    const std::int64_t q_blocks = wide ? 4000 + static_cast<std::int64_t>(g() % 4000)
                                       : 20000 + static_cast<std::int64_t>(g() % 20000);
    const std::int64_t kv_blocks = wide ? 600 + static_cast<std::int64_t>(g() % 500)
                                        : 40 + static_cast<std::int64_t>(g() % 120);
    PrepProblem pr;
    pr.batch = 1;
    pr.heads_kv = 1 + static_cast<std::int64_t>(g() % 2);
    pr.heads_q = 2 * pr.heads_kv;
    pr.n_q = q_blocks * plan.block_q;
    pr.n_kv = kv_blocks * plan.block_kv;
    pr.head_dim = 64;
    const auto dm = mixed_rows_mask(1, pr.heads_q, q_blocks, kv_blocks, g);
    SCOPED_TRACE("iter " + std::to_string(iter) + " plan " + plan_id(plan));
    ASSERT_EQ(gpu_vs_cpu(plan, dm, pr, reused, prep::RowBuilder::kPersistent), "");
    ASSERT_EQ(gpu_vs_cpu(plan, dm, pr, reused, prep::RowBuilder::kStreaming), "");
    ASSERT_EQ(gpu_vs_cpu(plan, dm, pr, reused, prep::RowBuilder::kAuto), "");
  }
}

// Every device membership width (prep::member_bytes = c_q: 1, 2, 4, 8 bytes per word) on every tile-row builder path:
// c_q = 1 on the streaming and the persistent builder (run-major: written in final order by the streaming builder);
// c_q > 1 span and packed rows on the single-pass bitmap builder (packed: each entry's segmented OR stored once by
// its last unit), and rows too long for its bitmaps (n_kvb > 65,536 / c_q) on the two-pass builder, whose packed
// entries are OR-ed by several lanes (2-byte words through their aligned 32-bit word, next to other rows' words);
// each traversal (run-major with c_q > 1: the reorder kernel of each width). Downloads are widened to 8-byte words
// and must equal the CPU twins bit for bit.
TEST(LaunchPrepGpu, EveryMembershipWidthOnEveryBuilderMatchesCpuTwins) {
  TESSERA_REQUIRE_GPU();
  std::mt19937_64 g(0xb17e5);
  DeviceTileMetadata reused;
  int iter = 0;
  for (const int c_q : {1, 2, 4, 8}) {
    for (const MappingKind kv : {MappingKind::kCoarsen, MappingKind::kPacked}) {
      for (const bool long_rows : {false, true}) {
        for (const Traversal t : {Traversal::kAscending, Traversal::kDescending, Traversal::kRunMajor}) {
          Plan plan;
          plan.head_dim = 64;
          plan.block_q = plan.block_kv = 16;
          plan.q = c_q == 1 ? DimMapping{MappingKind::kDirect, 1} : DimMapping{MappingKind::kCoarsen, c_q};
          plan.kv = DimMapping{kv, 4};
          plan.org.traversal = t;
          PrepProblem pr;
          pr.heads_q = 2;
          pr.n_q = 16 * (long_rows ? 48 : 400) - 3;
          pr.n_kv = 16 * (long_rows ? 65536 / c_q + 300 : 700) - 5;
          pr.head_dim = 64;
          const auto dm = plan_testing::random_mask(1, 2, num_blocks(pr.n_q, 16), num_blocks(pr.n_kv, 16),
                                                    long_rows ? 0.003 : 0.2, g());
          for (const prep::RowBuilder rb :
               {prep::RowBuilder::kStreaming, prep::RowBuilder::kPersistent, prep::RowBuilder::kAuto}) {
            if (c_q > 1 && rb == prep::RowBuilder::kPersistent) continue;  // c_q = 1 only
            SCOPED_TRACE("iter " + std::to_string(iter) + " plan " + plan_id(plan) + " builder " +
                         std::to_string(static_cast<int>(rb)));
            ASSERT_EQ(gpu_vs_cpu(plan, dm, pr, reused, rb), "");
          }
          ++iter;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tessera
