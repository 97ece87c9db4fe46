// The GPU runtime end to end: validate -> mu(M) -> select -> prepare -> launch, against the float64 reference;
// exact-repeat cache; forced plans; plan-table fallbacks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <set>

#include "device_tensor.hpp"
#include "gpu_test_util.hpp"
#include "host_tensor.hpp"
#include "core/plan.hpp"
#include "kernels/launch.hpp"
#include "mask_gen.hpp"
#include "runtime_case.hpp"
#include "tessera/error.hpp"
#include "tessera/mask_state.hpp"
#include "tessera/reference.hpp"
#include "tessera/runtime.hpp"

namespace tessera {
namespace {

using testing::DeviceTensor;
using testing::HostTensor;
using namespace runtime_test;

TEST(Runtime, SelectedPlansMatchTheReference) {
  TESSERA_REQUIRE_GPU();
  Runtime rt;
  int i = 0;
  for (auto [bq, bkv] : {std::pair{16, 16}, {32, 16}, {32, 32}, {64, 32}, {64, 64}, {128, 64}, {128, 128}, {384, 384}}) {
    for (DType t : {DType::kBFloat16, DType::kFloat16}) {
      for (std::int64_t d : {64, 128}) {
        GpuCase c = make_case(100 + i++, bq, bkv, bq == 384 ? 1000 : 700, 4, 2, d, t, 0.3);
        try {
          rt.run(c.req, nullptr);
        } catch (const Error& e) {
          // A key without any compiled kernel must say so precisely, never run something else.
          EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.what();
          EXPECT_EQ(e.argument(), "request");
          continue;
        }
        testing::device_sync();
        const double err = error_vs_reference(c);
        EXPECT_LE(err, t == DType::kBFloat16 ? 1e-2 : 5e-3) << rt.last_dispatch().plan_id;
        EXPECT_FALSE(rt.last_dispatch().cache_hit);
      }
    }
  }
}

// The coarsened pair counts (features coarsen_cost2/4/8) are taken only for a key whose tree splits on them (the
// embedded table: Q16K16), and then equal the CPU mu(M)'s; elsewhere, and for a forced plan, they are NaN.
TEST(Runtime, CoarsenCostsCountedOnlyWhereTheTreeReadsThem) {
  TESSERA_REQUIRE_GPU();
  Runtime rt;
  GpuCase small = make_case(41, 16, 16, 700, 4, 2, 128, DType::kBFloat16, 0.3);
  rt.run(small.req, nullptr);
  testing::device_sync();
  const MaskStats cpu = build_mask_state_cpu(small.host_mask.mask).stats;
  const MaskStats& got = rt.last_dispatch().stats;
  EXPECT_EQ(got.counters, cpu.counters);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(got.coarsen_cost[i], cpu.coarsen_cost[i]) << i;
  EXPECT_LE(error_vs_reference(small), 1e-2);
  GpuCase big = make_case(42, 64, 64, 700, 4, 2, 128, DType::kBFloat16, 0.3);
  rt.run(big.req, nullptr);
  testing::device_sync();
  EXPECT_EQ(rt.last_dispatch().stats.counters.coarsened_pairs[0], -1);
  EXPECT_TRUE(std::isnan(rt.last_dispatch().stats.coarsen_cost[0]));
  EXPECT_EQ(rt.last_dispatch().stats.counters.active_blocks, build_mask_state_cpu(big.host_mask.mask).stats.counters.active_blocks);
  EXPECT_LE(error_vs_reference(big), 1e-2);
}

TEST(Runtime, EveryEligiblePlanOfARequestMatchesTheReference) {
  TESSERA_REQUIRE_GPU();
  Runtime rt;
  GpuCase c = make_case(7, 64, 64, 900, 4, 1, 128, DType::kBFloat16, 0.25);
  const auto plans = rt.eligible_plans(c.req);
  // The whole catalog (23 entries) gives this request more than 10 plans; a build filtered by
  // TESSERA_KERNEL_FILTER (one entry: 8 plans) at least two.
  ASSERT_GT(plans.size(), kernels::compiled_entries().size() >= 20 ? 10u : 1u);
  // One-stage entries (.s1) are reachable: t64x128.w4.s1 serves 64 x 64 blocks Coarsened/packed by 2 on KV.
  if (kernels::find_compiled_entry("mma.bf16.d128.t64x128.w4.s1")) {
    EXPECT_TRUE(std::any_of(plans.begin(), plans.end(), [](const std::string& id) {
      return id.find(".s1.w") != std::string::npos;
    }));
  }
  for (const std::string& id : plans) {
    poison(c);
    RunOptions o;
    o.plan_id = id;
    rt.run(c.req, nullptr, o);
    testing::device_sync();
    EXPECT_LE(error_vs_reference(c), 1e-2) << id;
    EXPECT_EQ(rt.last_dispatch().source, "forced");
  }
}

// Membership plans of every query coarsening the compiled entries allow, through the whole runtime (GPU launch
// preparation -> kernel): device membership words are c_q bytes (1, 2, 4, 8), so each width is written by the
// builders and read by the kernel here. Blocks of 64, 32 and 16 tokens on 64-token tiles give c_q = 1, 2 and 4, and
// 16-token blocks on a 128-token tile (when one is compiled, e.g. t128x64.w4.s2) c_q = 8. One plan per
// (c_q, KV mapping, traversal, persistent) keeps the count small on the full catalog.
TEST(Runtime, MembershipPlansOfEveryQueryCoarseningMatchTheReference) {
  TESSERA_REQUIRE_GPU();
  Runtime rt;
  std::set<int> widths;
  for (auto [bq, bkv] : {std::pair{64, 32}, {32, 32}, {16, 16}, {16, 64}}) {
    GpuCase c = make_case(31 + bq + bkv, bq, bkv, 700, 4, 2, 128, DType::kBFloat16, 0.3);
    const ReferenceOutput ref = reference_of(c);
    std::set<std::string> seen;
    for (const std::string& id : rt.eligible_plans(c.req)) {
      const Plan plan = parse_plan_id(id);
      if (!plan.has_membership()) continue;
      const int c_q = plan.q.kind == MappingKind::kCoarsen ? plan.q.factor : 1;
      const std::string key = std::to_string(c_q) + "/" + std::to_string(static_cast<int>(plan.kv.kind)) + "/" +
                              std::to_string(static_cast<int>(plan.org.traversal)) + "/" +
                              std::to_string(plan.org.persistent);
      if (!seen.insert(key).second) continue;
      widths.insert(c_q);
      poison(c);
      RunOptions o;
      o.plan_id = id;
      rt.run(c.req, nullptr, o);
      testing::device_sync();
      EXPECT_LE(error_vs(c, ref), 1e-2) << id;
    }
  }
  // Every compiled T_Q = 64 entry reaches c_q 1, 2 and 4; a T_Q = 128 entry with 16-token blocks reaches 8.
  EXPECT_TRUE(widths.count(1) && widths.count(2) && widths.count(4)) << widths.size();
  bool t128 = false;
  for (const auto& e : kernels::compiled_entries()) t128 = t128 || (e.tile_q == 128 && e.head_dim == 128);
  if (t128) {
    EXPECT_TRUE(widths.count(8));
  }
}

TEST(Runtime, ExactRepeatsSkipPreparationAndStayCorrect) {
  TESSERA_REQUIRE_GPU();
  Runtime rt;
  GpuCase c = make_case(9, 64, 64, 640, 2, 2, 128, DType::kBFloat16, 0.3);
  RunOptions o;
  o.mask_version = 41;
  rt.run(c.req, nullptr, o);
  EXPECT_FALSE(rt.last_dispatch().cache_hit);
  poison(c);
  rt.run(c.req, nullptr, o);
  EXPECT_TRUE(rt.last_dispatch().cache_hit);
  testing::device_sync();
  EXPECT_LE(error_vs_reference(c), 1e-2);
  o.mask_version = 42;  // a new version: rebuilt
  rt.run(c.req, nullptr, o);
  EXPECT_FALSE(rt.last_dispatch().cache_hit);
}

TEST(Runtime, IneligibleForcedPlanIsRejectedAndNothingIsWritten) {
  TESSERA_REQUIRE_GPU();
  Runtime rt;
  GpuCase c = make_case(11, 64, 64, 256, 2, 2, 128, DType::kBFloat16, 0.3);
  RunOptions o;
  o.plan_id = "sm90a.mma.bf16.d64.q64d.kv64d.g1.tasc.split1.s2.w4";  // D = 64 kernel for a D = 128 request
  try {
    rt.run(c.req, nullptr, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "plan_id");
  }
  const HostTensor out = testing::download(c.dout);
  for (std::int64_t i = 0; i < out.numel(); ++i) ASSERT_TRUE(std::isnan(out.get(i))) << i;
  AttentionRequest bad = c.req;
  bad.geometry.block_kv = 24;
  try {
    rt.run(bad, nullptr);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "geometry.block_kv");
  }
}

TEST(Runtime, CorruptOrMissingPlanTables) {
  TESSERA_REQUIRE_GPU();
  const std::string path = ::testing::TempDir() + "/corrupt_table.json";
  std::ofstream(path) << "{\"format\": \"tessera-plan-table\", \"format_version\": 99}";
  // A user table that is not usable is an error naming the file, never a silent fallback (plan_table_file.hpp).
  try {
    Runtime rt(RuntimeOptions{.plan_table_path = path, .use_plan_table = true, .max_workspace_bytes = -1});
    ADD_FAILURE() << "no error for a corrupt plan_table_path: " << rt.table_status();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kFormatError) << e.what();
    EXPECT_EQ(e.argument(), "plan_table_path") << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  Runtime plain(RuntimeOptions{.plan_table_path = "", .use_plan_table = false, .max_workspace_bytes = -1});
  GpuCase c = make_case(13, 64, 64, 300, 2, 2, 128, DType::kBFloat16, 0.3);
  plain.run(c.req, nullptr);  // documented default plan
  EXPECT_EQ(plain.last_dispatch().source, "default");
  EXPECT_EQ(plain.last_dispatch().table_status, plain.table_status());
  testing::device_sync();
  EXPECT_LE(error_vs_reference(c), 1e-2);
  // A path that cannot be read as a file (missing, or a directory) is an I/O error naming the option, not a
  // "corrupt table" that falls back to the default plans.
  for (const std::string& unreadable : {std::string("/nonexistent/table.json"), ::testing::TempDir()}) {
    try {
      Runtime bad(RuntimeOptions{.plan_table_path = unreadable, .use_plan_table = true, .max_workspace_bytes = -1});
      ADD_FAILURE() << "no error for plan_table_path " << unreadable << ": " << bad.table_status();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kIoError) << unreadable << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("plan_table_path"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tessera
