// Plan model and canonical id: round trips and precise parse errors.
#include <gtest/gtest.h>

#include <random>

#include "core/plan.hpp"
#include "tessera/error.hpp"

namespace tessera {
namespace {

Plan random_plan(std::mt19937_64& g) {
  auto pick = [&](auto... xs) {
    const int v[] = {xs...};
    return v[std::uniform_int_distribution<int>(0, sizeof...(xs) - 1)(g)];
  };
  Plan p;
  p.arch = static_cast<Arch>(pick(0, 1, 2, 3, 4));
  p.family = pick(0, 1) ? KernelFamily::kWgmma : KernelFamily::kMma;
  p.dtype = pick(0, 1) ? DType::kFloat16 : DType::kBFloat16;
  p.head_dim = pick(64, 96, 128, 256);
  p.block_q = pick(16, 32, 64, 128, 256, 384, 1024);
  p.block_kv = pick(16, 32, 64, 128, 256, 384, 1024);
  auto mapping = [&](int block, bool kv) {
    for (;;) {
      DimMapping m;
      const int kind = pick(0, 1, 2, 3);
      m.kind = static_cast<MappingKind>(kind);
      m.factor = kind == 0 ? 1 : pick(2, 4, 8);
      if (!kv && m.kind == MappingKind::kPacked) continue;
      if (m.kind == MappingKind::kRefine && (block % m.factor != 0 || (block / m.factor) % 16 != 0)) continue;
      return m;
    }
  };
  p.q = mapping(p.block_q, false);
  p.kv = mapping(p.block_kv, true);
  p.org.group = pick(1, 2, 3, 8, 64);
  p.org.persistent = pick(0, 1);
  p.org.traversal = static_cast<Traversal>(pick(0, 1, 2));
  p.org.split = pick(1, 2, 4, 8, 16, 32, 64);
  p.org.stages = pick(1, 2, 3, 4);
  p.warps = pick(1, 4, 8, 12, 16);
  return p;
}

TEST(PlanId, ExampleIsCanonical) {
  const std::string id = "sm90a.mma.bf16.d128.q64c2.kv64p4.g1.tasc.split2.s3.w4";
  const Plan p = parse_plan_id(id);
  EXPECT_EQ(p.arch, Arch::kSm90a);
  EXPECT_EQ(p.family, KernelFamily::kMma);
  EXPECT_EQ(p.dtype, DType::kBFloat16);
  EXPECT_EQ(p.head_dim, 128);
  EXPECT_EQ(p.block_q, 64);
  EXPECT_EQ(p.q, (DimMapping{MappingKind::kCoarsen, 2}));
  EXPECT_EQ(p.kv, (DimMapping{MappingKind::kPacked, 4}));
  EXPECT_EQ(p.tile_q(), 128);
  EXPECT_EQ(p.tile_kv(), 256);
  EXPECT_EQ(p.org.split, 2);
  EXPECT_EQ(p.org.stages, 3);
  EXPECT_EQ(plan_id(p), id);
  EXPECT_EQ(plan_kernel_name(p), "mma.bf16.d128.t128x256.w4.s3");
  const Plan r = parse_plan_id("sm120.wgmma.f16.d64.q128r4.kv32d.g8p.trun.split64.s4.w8");
  EXPECT_EQ(r.q, (DimMapping{MappingKind::kRefine, 4}));
  EXPECT_EQ(r.tile_q(), 32);
  EXPECT_TRUE(r.org.persistent);
  EXPECT_EQ(r.org.group, 8);
  EXPECT_EQ(r.org.traversal, Traversal::kRunMajor);
}

TEST(PlanId, OneStageNamesTheSingleBufferedEntry) {
  const std::string id = "sm86.mma.bf16.d128.q16d.kv64d.g1.tasc.split1.s1.w4";
  const Plan p = parse_plan_id(id);
  EXPECT_EQ(p.org.stages, 1);
  EXPECT_EQ(plan_id(p), id);
  EXPECT_EQ(plan_kernel_name(p), "mma.bf16.d128.t16x64.w4.s1");
}

TEST(PlanId, RandomRoundTrips) {
  std::mt19937_64 g(20261129);
  for (int i = 0; i < 2000; ++i) {
    const Plan p = random_plan(g);
    const std::string id = plan_id(p);
    const Plan back = parse_plan_id(id);
    ASSERT_EQ(back, p) << id;
    ASSERT_EQ(plan_id(back), id);
  }
}

void expect_bad(const std::string& id, const std::string& needle) {
  try {
    parse_plan_id(id);
    ADD_FAILURE() << "no error for " << id;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.argument(), "plan_id");
    EXPECT_NE(e.message().find(needle), std::string::npos) << id << " -> " << e.message();
  }
}

TEST(PlanId, MalformedIdsNameTheBadToken) {
  const std::string ok = "sm90a.mma.bf16.d128.q64c2.kv64p4.g1.tasc.split2.s3.w4";
  ASSERT_NO_THROW(parse_plan_id(ok));
  expect_bad("sm91.mma.bf16.d128.q64c2.kv64p4.g1.tasc.split2.s3.w4", "token 1 'sm91'");
  expect_bad("sm90a.tma.bf16.d128.q64c2.kv64p4.g1.tasc.split2.s3.w4", "token 2 'tma'");
  expect_bad("sm90a.mma.f32.d128.q64c2.kv64p4.g1.tasc.split2.s3.w4", "token 3 'f32'");
  expect_bad("sm90a.mma.bf16.h128.q64c2.kv64p4.g1.tasc.split2.s3.w4", "token 4 'h128'");
  expect_bad("sm90a.mma.bf16.d128.q64x2.kv64p4.g1.tasc.split2.s3.w4", "token 5 'q64x2': unknown mapping 'x2'");
  expect_bad("sm90a.mma.bf16.d128.q64c2.kv64.g1.tasc.split2.s3.w4", "token 6 'kv64': unknown mapping ''");
  expect_bad("sm90a.mma.bf16.d128.q64c2.kv64p4.gx.tasc.split2.s3.w4", "token 7 'gx'");
  expect_bad("sm90a.mma.bf16.d128.q64c2.kv64p4.g1.tup.split2.s3.w4", "token 8 'tup'");
  expect_bad("sm90a.mma.bf16.d128.q64c2.kv64p4.g1.tasc.split02.s3.w4", "token 9 'split02'");
  expect_bad("sm90a.mma.bf16.d128.q64c2.kv64p4.g1.tasc.split2.s3", "missing token 11");
  expect_bad(ok + ".x", "token 12 'x': unexpected extra token");
  expect_bad("sm90a.mma.bf16.d128.q64p2.kv64p4.g1.tasc.split2.s3.w4", "plan.q");
  expect_bad("sm90a.mma.bf16.d128.q64c3.kv64p4.g1.tasc.split2.s3.w4", "plan.q.factor");
  expect_bad("sm90a.mma.bf16.d128.q16r2.kv64p4.g1.tasc.split2.s3.w4", "plan.q.factor");
  expect_bad("sm90a.mma.bf16.d128.q64c2.kv64p4.g1.tasc.split3.s3.w4", "plan.org.split");
  expect_bad("sm90a.mma.bf16.d128.q64c2.kv64p4.g1.tasc.split2.s5.w4", "plan.org.stages");
  expect_bad("sm90a.mma.bf16.d128.q64c2.kv64p4.g1.tasc.split2.s0.w4", "plan.org.stages");
  expect_bad("sm90a.mma.bf16.d48.q64c2.kv64p4.g1.tasc.split2.s3.w4", "plan.head_dim");
  expect_bad("sm90a.mma.bf16.d128.q40c2.kv64p4.g1.tasc.split2.s3.w4", "plan.block_q");
  expect_bad("", "token 1 ''");
}

TEST(PlanId, PrintRejectsMalformedPlans) {
  Plan p;
  p.q = {MappingKind::kPacked, 2};
  EXPECT_THROW(plan_id(p), Error);
  p.q = {MappingKind::kDirect, 2};
  EXPECT_THROW(plan_id(p), Error);
  p.q = {MappingKind::kRefine, 8};  // 64 / 8 = 8 < 16
  EXPECT_THROW(plan_id(p), Error);
}

}  // namespace
}  // namespace tessera
