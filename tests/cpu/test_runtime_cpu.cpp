// The CPU execution path run_cpu(): selection + CPU launch preparation + float64 executor equals the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "host_tensor.hpp"
#include "mask_gen.hpp"
#include "tessera/error.hpp"
#include "tessera/mask_state.hpp"
#include "tessera/reference.hpp"
#include "tessera/runtime_cpu.hpp"

namespace tessera {
namespace {

using testing::HostTensor;

struct Case {
  HostTensor q, k, v, o, lse;
  testing::HostMaskTensors mask;
  AttentionRequest req;
};

Case make_case(std::uint64_t seed, int bq, int bkv, std::int64_t n, std::int64_t hq, std::int64_t hkv,
               MaskFormat format, testing::MaskPattern pattern, bool broadcast_heads) {
  Case c;
  std::mt19937_64 g(seed);
  const std::int64_t d = 64;
  c.q = HostTensor(DType::kBFloat16, {1, n, hq, d});
  c.k = HostTensor(DType::kBFloat16, {1, n, hkv, d});
  c.v = HostTensor(DType::kBFloat16, {1, n, hkv, d});
  c.o = HostTensor(DType::kFloat64, {1, n, hq, d});
  c.lse = HostTensor(DType::kFloat32, {1, hq, n});
  c.q.fill_normal(seed + 1);
  c.k.fill_normal(seed + 2);
  c.v.fill_normal(seed + 3);
  c.o.poison();
  c.lse.poison();
  MaskShape s{1, broadcast_heads ? 1 : hq, (n + bq - 1) / bq, (n + bkv - 1) / bkv};
  const auto bits = testing::random_mask_bits(s, pattern, 0.3, g);
  c.mask = format == MaskFormat::kDense      ? testing::encode_dense(s, bits)
           : format == MaskFormat::kBlockCsr ? testing::encode_csr(s, bits)
                                              : testing::encode_index_lists(s, bits, 2, &g);
  c.req.q = c.q.view();
  c.req.k = c.k.view();
  c.req.v = c.v.view();
  c.req.o = c.o.view();
  c.req.lse = c.lse.view();
  c.req.geometry = {bq, bkv};
  c.req.mask = c.mask.mask;
  return c;
}

void expect_matches_reference(Case& c, const DispatchInfo& info) {
  const ReferenceOutput ref = reference_attention_cpu(c.req, build_mask_state_cpu(c.req.mask));
  std::vector<double> o(ref.o.size()), lse(ref.lse.size());
  for (std::size_t i = 0; i < o.size(); ++i) o[i] = c.o.get(static_cast<std::int64_t>(i));
  EXPECT_LE(testing::relative_l2(o.data(), ref.o.data(), static_cast<std::int64_t>(o.size())), 1e-12) << info.plan_id;
  for (std::size_t i = 0; i < lse.size(); ++i) {
    const double got = c.lse.get(static_cast<std::int64_t>(i)), want = ref.lse[i];
    if (std::isinf(want)) {
      EXPECT_TRUE(std::isinf(got) && got < 0) << i;
    } else {
      EXPECT_NEAR(got, want, 1e-5 * std::max(1.0, std::abs(want))) << i;  // LSE is stored in f32
    }
  }
}

TEST(RunCpu, SelectedPlansMatchTheReference) {
  int n = 0;
  for (auto [bq, bkv] : {std::pair{16, 16}, {32, 16}, {64, 64}, {128, 64}, {384, 384}}) {
    for (MaskFormat f : {MaskFormat::kDense, MaskFormat::kBlockCsr, MaskFormat::kIndexLists}) {
      const std::int64_t tokens = bq == 384 ? 400 : 300;  // ragged last blocks
      ++n;
      Case c = make_case(1000 + n, bq, bkv, tokens, 4, 2, f, testing::MaskPattern::kRowDensity, n % 2 == 0);
      const DispatchInfo info = run_cpu(c.req);
      EXPECT_FALSE(info.plan_id.empty());
      EXPECT_TRUE(info.source == "default" || info.source == "table" || info.source == "base") << info.source;
      // Every stage's host time is recorded, and they add up to no more than the whole call.
      EXPECT_GT(info.host_mask_state_us, 0);
      EXPECT_GT(info.host_prepare_us, 0);
      EXPECT_GT(info.host_launch_us, 0);
      EXPECT_LE(info.host_mask_state_us + info.host_select_us + info.host_prepare_us + info.host_launch_us,
                info.host_dispatch_us);
      EXPECT_FALSE(info.prepare_speculated);
      expect_matches_reference(c, info);
    }
  }
}

TEST(RunCpu, ForcedPlansRunOrExplainWhyNot) {
  Case c = make_case(77, 64, 64, 256, 2, 2, MaskFormat::kDense, testing::MaskPattern::kRandom, false);
  CpuRunOptions o;
  o.plan_id = "sm90a.mma.bf16.d64.q64c2.kv64p2.g1.tasc.split2.s2.w8";
  const DispatchInfo info = run_cpu(c.req, o);
  EXPECT_EQ(info.source, "forced");
  EXPECT_EQ(info.plan_id, o.plan_id);
  expect_matches_reference(c, info);

  c.o.poison();
  o.plan_id = "sm90a.mma.bf16.d128.q64d.kv64d.g1.tasc.split1.s2.w4";  // head_dim 128 kernel for a D = 64 request
  try {
    run_cpu(c.req, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "plan_id");
    EXPECT_NE(e.message().find("not eligible"), std::string::npos) << e.message();
  }
  for (std::int64_t i = 0; i < c.o.numel(); ++i) ASSERT_TRUE(std::isnan(c.o.get(i))) << "written on error at " << i;
  o.plan_id = "not-a-plan";
  EXPECT_THROW(run_cpu(c.req, o), Error);
}

TEST(RunCpu, BadRequestsAreRejectedBeforeAnythingIsWritten) {
  Case c = make_case(5, 64, 64, 256, 2, 2, MaskFormat::kDense, testing::MaskPattern::kRandom, false);
  c.req.geometry.block_q = 40;
  try {
    run_cpu(c.req);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "geometry.block_q");
  }
  for (std::int64_t i = 0; i < c.o.numel(); ++i) ASSERT_TRUE(std::isnan(c.o.get(i)));
  CpuRunOptions bad_arch;
  bad_arch.arch = "sm70";
  c.req.geometry.block_q = 64;
  try {
    run_cpu(c.req, bad_arch);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "arch");
  }
}

// O (or LSE) sharing memory with an input is rejected by validation, before the executor writes anything: q stays
// as it was, and LSE is not written.
TEST(RunCpu, OutputsOverlappingInputsAreRejected) {
  Case c = make_case(6, 64, 64, 256, 2, 2, MaskFormat::kDense, testing::MaskPattern::kRandom, false);
  const std::vector<unsigned char> q_before = c.q.bytes;
  auto expect_rejected = [&](const std::string& argument, const std::string& fragment) {
    try {
      run_cpu(c.req);
      ADD_FAILURE() << argument << " overlapping an input was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), argument);
      EXPECT_NE(e.message().find(fragment), std::string::npos) << e.message();
    }
  };
  c.req.o = c.q.view();  // in-place attention over q: O (bf16, q's shape) is exactly q's memory
  expect_rejected("o", "overlaps q's");
  EXPECT_EQ(c.q.bytes, q_before);
  for (std::int64_t i = 0; i < c.lse.numel(); ++i) ASSERT_TRUE(std::isnan(c.lse.get(i)));
  c.req.o = c.o.view();
  c.req.lse = make_tensor(c.o.data(), DType::kFloat32, Device::kCpu, {1, 2, 256});  // LSE inside O
  expect_rejected("lse", "overlaps o's");
  for (std::int64_t i = 0; i < c.o.numel(); ++i) ASSERT_TRUE(std::isnan(c.o.get(i)));
}

}  // namespace
}  // namespace tessera
