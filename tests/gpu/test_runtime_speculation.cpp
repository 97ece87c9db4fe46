// Speculative launch preparation (RuntimeOptions::speculative_prepare): the preparation enqueued before mu(M)'s
// statistics are read is kept only when selection names its plan and the mask fits its buffers; every other case
// (another plan, a larger mask, an invalid mask) must give the same output as no speculation, or the same error with
// nothing written. Every output is checked against the float64 reference after poisoning.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include "core/catalog.hpp"
#include "core/plan_table.hpp"
#include "core/selector.hpp"
#include "cuda/check.cuh"
#include "cuda/launch_prep_gpu.hpp"
#include "kernels/launch.hpp"
#include "runtime_case.hpp"
#include "tessera/error.hpp"

namespace tessera {
namespace {

using namespace runtime_test;
using testing::HostTensor;

/// Gives case `c` a new random dense mask of `density` (same shape and device buffer), host copy included.
void set_mask(GpuCase& c, double density, std::uint64_t seed) {
  const BlockMask& hm = c.host_req.mask;
  const MaskShape s{hm.batch, hm.heads, hm.n_qb, hm.n_kvb};
  std::mt19937_64 g(seed);
  const auto bits = testing::random_mask_bits(s, testing::MaskPattern::kRowDensity, density, g);
  c.host_mask = testing::encode_dense(s, bits);
  c.host_req.mask = c.host_mask.mask;
  HostTensor m(DType::kUInt8, {1, s.heads, s.n_qb, s.n_kvb});
  std::copy(bits.begin(), bits.end(), m.bytes.begin());
  testing::upload_into(m, c.dmask);
}

HostTensor run_poisoned(Runtime& rt, GpuCase& c, const RunOptions& o = {}) {
  poison(c);
  rt.run(c.req, nullptr, o);
  testing::device_sync();
  return testing::download(c.dout);
}

/// Runs case `c` (output poisoned first) with mu(M) `hs` given as a block-CSR mask in GPU memory instead of its dense
/// mask, and waits for it.
void run_csr_poisoned(Runtime& rt, GpuCase& c, const HostMaskState& hs, const RunOptions& o) {
  const DeviceMaskState csr = testing::upload_mask_state(hs);
  AttentionRequest r = c.req;
  r.mask = testing::device_csr_mask(csr);
  poison(c);
  rt.run(r, nullptr, o);
  testing::device_sync();
}

// Repeated new-mask requests of one shape: the first has no history (no speculation), the next ones keep the
// speculative preparation, and every output matches the reference and, bit for bit, a runtime without speculation.
TEST(RuntimeSpeculation, RepeatedRequestsKeepTheSpeculativePreparation) {
  TESSERA_REQUIRE_GPU();
  Runtime rt;
  Runtime plain(RuntimeOptions{.plan_table_path = "", .use_plan_table = true, .max_workspace_bytes = -1,
                               .speculative_prepare = false});
  GpuCase c = make_case(21, 64, 64, 1500, 4, 2, 128, DType::kBFloat16, 0.3);
  const double want_err = 1e-2;
  int hits = 0;
  for (int call = 0; call < 4; ++call) {
    set_mask(c, 0.3, 500 + call);  // a new mask of about the same density each call
    const HostTensor got = run_poisoned(rt, c);
    const DispatchInfo info = rt.last_dispatch();
    EXPECT_LE(error_vs_reference(c), want_err) << info.plan_id;
    const HostTensor ref = run_poisoned(plain, c);
    EXPECT_FALSE(plain.last_dispatch().prepare_speculated);
    ASSERT_EQ(plain.last_dispatch().plan_id, info.plan_id);
    EXPECT_EQ(std::memcmp(got.bytes.data(), ref.bytes.data(), got.bytes.size()), 0) << "call " << call;
    if (call == 0) {
      EXPECT_FALSE(info.prepare_speculated);
    }
    hits += info.prepare_speculation_hit;
  }
  // Calls 1-3 speculate the plan call 0 chose; a zero-copy plan (nothing to launch) is never speculated.
  if (rt.last_dispatch().prepare_speculated) {
    EXPECT_GE(hits, 1);
  }
}

// A forced plan is speculated from the first call. A much denser mask than the buffers were sized for fails the gate
// (the speculative kernels write nothing) and is prepared again after the wait; an invalid mask raises its error
// with nothing written to O, and the next valid request is correct.
TEST(RuntimeSpeculation, LargerAndInvalidMasksFailTheGate) {
  TESSERA_REQUIRE_GPU();
  Runtime rt;
  GpuCase c = make_case(23, 64, 64, 1200, 4, 2, 128, DType::kBFloat16, 0.05);
  // A plan with a tile-row builder: Coarsened KV by 2 (T_KV = 128) when compiled, else Refined; not persistent
  // (persistent plans are never speculated).
  std::string forced;
  for (const std::string& id : rt.eligible_plans(c.req)) {
    if (id.find(".tasc.split2.") == std::string::npos || id.find(".g1.") == std::string::npos) continue;
    if (id.find(".kv64c2.") != std::string::npos || (forced.empty() && id.find(".kv64r2.") != std::string::npos))
      forced = id;
  }
  ASSERT_FALSE(forced.empty());
  RunOptions o;
  o.plan_id = forced;
  run_poisoned(rt, c, o);
  EXPECT_TRUE(rt.last_dispatch().prepare_speculated) << forced;
  EXPECT_LE(error_vs_reference(c), 1e-2);
  run_poisoned(rt, c, o);  // the same mask again: mu(M)'s buffers fit, the speculation is kept
  EXPECT_TRUE(rt.last_dispatch().prepare_speculation_hit);
  EXPECT_LE(error_vs_reference(c), 1e-2);
  RunOptions repeat = o;  // an exact repeat after a speculative call reports no speculation and no mu(M) time
  repeat.mask_version = 77;
  rt.run(c.req, nullptr, repeat);
  EXPECT_TRUE(rt.last_dispatch().prepare_speculated);
  run_poisoned(rt, c, repeat);
  EXPECT_TRUE(rt.last_dispatch().cache_hit);
  EXPECT_FALSE(rt.last_dispatch().prepare_speculated);
  EXPECT_FALSE(rt.last_dispatch().prepare_speculation_hit);
  EXPECT_EQ(rt.last_dispatch().host_mask_state_us, 0);
  EXPECT_LE(error_vs_reference(c), 1e-2);

  set_mask(c, 0.9, 99);  // about 18x the active blocks: more than mu(M)'s buffers hold
  run_poisoned(rt, c, o);
  EXPECT_TRUE(rt.last_dispatch().prepare_speculated);
  EXPECT_FALSE(rt.last_dispatch().prepare_speculation_hit);
  EXPECT_LE(error_vs_reference(c), 1e-2);

  // An invalid block-CSR mask of the same shape: column index n_kvb in its first active block.
  const HostMaskState hs = build_mask_state_cpu(c.host_req.mask);
  DeviceMaskState bad = testing::upload_mask_state(hs);
  const std::int32_t out_of_range = static_cast<std::int32_t>(hs.shape.n_kvb);
  TESSERA_CUDA_CHECK(cudaMemcpy(bad.col_indices.data(), &out_of_range, 4, cudaMemcpyHostToDevice));
  AttentionRequest bad_req = c.req;
  bad_req.mask = testing::device_csr_mask(bad);
  poison(c);
  try {
    rt.run(bad_req, nullptr, o);
    FAIL() << "invalid mask accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "mask.col_indices") << e.what();
  }
  testing::device_sync();
  const HostTensor out = testing::download(c.dout);
  for (std::int64_t i = 0; i < out.numel(); ++i) ASSERT_TRUE(std::isnan(out.get(i))) << i;

  // The valid CSR mask through the same runtime, forced plan speculated: correct.
  run_csr_poisoned(rt, c, hs, o);
  EXPECT_TRUE(rt.last_dispatch().prepare_speculated);
  EXPECT_LE(error_vs_reference(c), 1e-2);
}

// Run-major traversal with c_q = 1 keeps mu(M)-sized run tables in global memory when a CTA's 32 tile rows hold more
// than 4,096 columns: the speculative preparation must size them for the gate's capacity (it once sized them from
// mu(M)'s nnz, still 0 when the hook runs). A forced run-major plan on dense rows (250 KV blocks) of a block-CSR
// mask, speculated from the first call, then the same mask in dense form (mu(M)'s capacity from the CSR call holds it).
// The overrun left the outputs correct on the H200 (it wrote into other allocations): compute-sanitizer memcheck on
// this test found invalid global writes with the old sizing and 0 errors with the fix (session 9, calls 8-9).
TEST(RuntimeSpeculation, RunMajorRunTablesAreSizedForTheCapacity) {
  TESSERA_REQUIRE_GPU();
  Runtime rt;
  GpuCase c = make_case(27, 16, 16, 4000, 2, 2, 128, DType::kBFloat16, 0.95);
  std::string forced;
  for (const std::string& id : rt.eligible_plans(c.req)) {
    const Plan p = parse_plan_id(id);
    if (forced.empty() && p.org.traversal == Traversal::kRunMajor && p.org.split == 1 && !p.org.persistent &&
        p.q.kind != MappingKind::kCoarsen)
      forced = id;
  }
  if (forced.empty()) GTEST_SKIP() << "no run-major c_q = 1 plan for 16 x 16 blocks in this build";
  RunOptions o;
  o.plan_id = forced;
  const HostMaskState hs = build_mask_state_cpu(c.host_req.mask);
  const std::size_t rows = static_cast<std::size_t>(hs.shape.rows());
  ASSERT_GT(hs.col_indices.size(), rows * 4096 / 32);  // rows of about 180 active blocks: > 4,096 per 32 rows
  run_csr_poisoned(rt, c, hs, o);
  EXPECT_TRUE(rt.last_dispatch().prepare_speculated) << forced;
  EXPECT_TRUE(rt.last_dispatch().prepare_speculation_hit) << forced;
  EXPECT_LE(error_vs_reference(c), 1e-2) << forced;
  for (int i = 0; i < 2; ++i) {
    run_poisoned(rt, c, o);
    EXPECT_TRUE(rt.last_dispatch().prepare_speculated);
    EXPECT_LE(error_vs_reference(c), 1e-2) << forced << " call " << i;
  }
}

// Masks of one shape whose statistics select different plans (a plan table of one split on density, written for the
// test): a speculation that names another plan than the one selected is discarded (the stream is synchronized and
// the selected plan prepared) and the output stays correct; after a miss the runtime waits until one plan is chosen
// twice in a row before speculating again.
TEST(RuntimeSpeculation, ASpeculationOfAnotherPlanIsDiscarded) {
  TESSERA_REQUIRE_GPU();
  GpuCase c = make_case(25, 64, 64, 2048, 4, 4, 128, DType::kBFloat16, 0.05);
  std::vector<std::string> launching;  // split-1 plans whose preparation launches kernels
  {
    Runtime probe;
    for (const std::string& id : probe.eligible_plans(c.req)) {
      const Plan p = parse_plan_id(id);
      if (p.org.split == 1 && !p.org.persistent && prepare_plan_gpu_launches(p, true)) launching.push_back(id);
    }
  }
  ASSERT_GE(launching.size(), 2u);
  const std::string sparse_plan = launching[0], dense_plan = launching.back();
  EligibilityRequest er;
  er.arch = Arch::kSm90a;
  er.dtype = DType::kBFloat16;
  er.head_dim = 128;
  PlanTable table;
  table.catalog_version = std::string(catalog_version());
  table.arch = "sm90a";
  RegimeTree t;
  t.key = request_key(er).str();
  t.base_plan = dense_plan;
  t.nodes = {TreeNode{static_cast<int>(Feature::kDensity), table.schema.bucket(Feature::kDensity, 0.05), 1, 2, -1},
             TreeNode{-1, 0, -1, -1, 0}, TreeNode{-1, 0, -1, -1, 1}};
  t.rankings = {{sparse_plan, dense_plan}, {dense_plan}};
  t.leaf_cases = {32, 32};
  table.trees[t.key] = t;
  const std::string path = ::testing::TempDir() + "/speculation_table.json";
  std::ofstream(path) << plan_table_to_json(table);
  Runtime rt(RuntimeOptions{.plan_table_path = path, .use_plan_table = true, .max_workspace_bytes = -1});
  ASSERT_EQ(rt.table_status().find("rejected"), std::string::npos) << rt.table_status();

  struct Step {
    double density;
    std::uint64_t seed;  // repeated masks repeat their seed, so mu(M)'s grown buffers hold them exactly
    const std::string* plan;
    bool speculated, hit;
  };
  // sparse: 0.03 (leaf 0), dense: 0.6 (leaf 1). Calls 2 and 5 miss; call 3 follows a miss and one dense choice,
  // so it does not speculate; call 4 (dense chosen twice) does, and keeps it.
  const Step steps[] = {{0.03, 800, &sparse_plan, false, false}, {0.03, 800, &sparse_plan, true, true},
                        {0.6, 801, &dense_plan, true, false},    {0.6, 801, &dense_plan, false, false},
                        {0.6, 801, &dense_plan, true, true},     {0.03, 802, &sparse_plan, true, false}};
  for (int i = 0; i < 6; ++i) {
    set_mask(c, steps[i].density, steps[i].seed);
    run_poisoned(rt, c);
    const DispatchInfo info = rt.last_dispatch();
    EXPECT_EQ(info.plan_id, *steps[i].plan) << "call " << i;
    EXPECT_EQ(info.prepare_speculated, steps[i].speculated) << "call " << i;
    EXPECT_LE(error_vs_reference(c), 1e-2) << "call " << i << " " << info.plan_id;
    EXPECT_EQ(info.prepare_speculation_hit, steps[i].hit) << "call " << i;
  }
}

}  // namespace
}  // namespace tessera
