// The CPU plan executor preserves E(M): for every mapping x organization x mask kind its output equals a
// brute-force float64 attention within 1e-12 relative L2 (and LSE within 1e-12).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/launch_prep.hpp"
#include "cpu/plan_executor.hpp"
#include "host_tensor.hpp"
#include "plan_test_util.hpp"
#include "tessera/error.hpp"
#include "tessera/mask_state.hpp"
#include "tessera/reference.hpp"
#include "tessera_corpus/family.hpp"

namespace tessera {
namespace {

using plan_testing::DenseBlockMask;
using testing::HostTensor;

constexpr std::int64_t kNq = 150, kNkv = 170, kD = 8;

// Logical block size for a mapping token (Refined needs B / r >= 16).
int block_for(const std::string& map) {
  if (map == "r4") return 64;
  if (map == "r2") return 32;
  return 16;
}

const char* const kOrgs[] = {"g1.tasc.split1", "g2.tdesc.split2", "g1p.trun.split4", "g4p.tasc.split8",
                             "g3.trun.split2"};
const char* const kKvMaps[] = {"d", "c2", "c4", "c8", "p2", "p4", "p8", "r2", "r4"};

struct MaskCase {
  std::string name;
  std::int64_t batch, heads_q, heads_kv;
  DenseBlockMask mask;
};

// The mask kinds of the issue, for block sizes bq x bkv.
std::vector<MaskCase> mask_cases(int bq, int bkv, std::uint64_t seed) {
  const std::int64_t nqb = (kNq + bq - 1) / bq, nkvb = (kNkv + bkv - 1) / bkv;
  std::vector<MaskCase> v;
  v.push_back({"random10", 1, 2, 2, plan_testing::random_mask(1, 2, nqb, nkvb, 0.1, seed + 1)});
  v.push_back({"random40", 1, 2, 2, plan_testing::random_mask(1, 2, nqb, nkvb, 0.4, seed + 2)});
  v.push_back({"random80", 2, 1, 1, plan_testing::random_mask(2, 1, nqb, nkvb, 0.8, seed + 3)});
  v.push_back({"empty", 1, 2, 2, DenseBlockMask(1, 2, nqb, nkvb)});
  {
    DenseBlockMask full(1, 1, nqb, nkvb);
    for (auto& x : full.bits) x = 1;
    v.push_back({"full", 1, 2, 1, full});
  }
  {
    DenseBlockMask one(1, 1, nqb, nkvb);
    one.at(0, 0, nqb / 2, nkvb / 3) = 1;
    v.push_back({"single", 1, 1, 1, one});
  }
  {
    // Ragged tails: the last query row and last kv column active (partial blocks), plus sparse noise.
    DenseBlockMask rag = plan_testing::random_mask(1, 2, nqb, nkvb, 0.15, seed + 4);
    for (std::int64_t h = 0; h < 2; ++h) {
      for (std::int64_t c = 0; c < nkvb; c += 2) rag.at(0, h, nqb - 1, c) = 1;
      for (std::int64_t r = 0; r < nqb; ++r) rag.at(0, h, r, nkvb - 1) = 1;
    }
    v.push_back({"ragged", 1, 2, 2, rag});
  }
  v.push_back({"broadcast", 2, 3, 3, plan_testing::random_mask(1, 1, nqb, nkvb, 0.3, seed + 5)});
  v.push_back({"gqa", 1, 4, 2, plan_testing::random_mask(1, 4, nqb, nkvb, 0.3, seed + 6)});
  {
    // Structured, sparsifier-like: sliding window band + attention-sink column + one global row (MQA).
    DenseBlockMask st(2, 1, nqb, nkvb);
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t r = 0; r < nqb; ++r) {
        const std::int64_t c0 = r * nkvb / nqb;
        for (std::int64_t c = std::max<std::int64_t>(0, c0 - 1); c <= std::min(nkvb - 1, c0 + 1); ++c) st.at(b, 0, r, c) = 1;
        st.at(b, 0, r, 0) = 1;
        if (r == b) for (std::int64_t c = 0; c < nkvb; ++c) st.at(b, 0, r, c) = 1;
      }
    v.push_back({"structured", 2, 2, 1, st});
  }
  {
    // Corpus sample: windows of a real corpus mask (Q64K64 family, case 0 of the small corpus) around the diagonal,
    // reused as the logical mask at this geometry (MQA, two mask heads from two windows).
    static const corpus::Case kCase = [] {
      corpus::CorpusOptions o;
      o.small = true;
      return corpus::make_case("Q64K64", 0, o);
    }();
    const corpus::PackedMask& pm = kCase.mask;
    DenseBlockMask cm(1, 2, nqb, nkvb);
    for (std::int64_t h = 0; h < 2; ++h) {
      const std::int64_t r0 = pm.n_qb * (h + 1) / 3, c0 = std::max<std::int64_t>(0, r0 - nkvb / 2);
      for (std::int64_t r = 0; r < nqb; ++r)
        for (std::int64_t c = 0; c < nkvb; ++c) cm.at(0, h, r, c) = pm.get(0, r0 + r, c0 + c) ? 1 : 0;
    }
    v.push_back({"corpus", 1, 2, 1, cm});
  }
  return v;
}

void fill_f64(HostTensor& t, std::uint64_t seed, std::vector<double>& copy) {
  t.fill_normal(seed);
  copy.resize(t.numel());
  for (std::int64_t i = 0; i < t.numel(); ++i) copy[i] = t.get(i);
}

// Runs one case; returns the relative L2 error of O (and checks LSE).
void run_case(const std::string& plan_id_str, const MaskCase& mc, int bq, int bkv, std::uint64_t seed) {
  SCOPED_TRACE(plan_id_str + " mask " + mc.name);
  const Plan plan = parse_plan_id(plan_id_str);
  const PrepProblem pr{mc.batch, mc.heads_q, mc.heads_kv, kNq, kNkv, 64};
  const HostMaskState ms = plan_testing::host_mask_state(mc.mask);
  const HostTileMetadata md = prepare_plan_cpu(plan, ms, pr);
  ASSERT_NO_THROW(check_tile_metadata(md));
  if (mc.name == "corpus" || mc.name.rfind("random", 0) == 0) {
    EXPECT_GT(ms.col_indices.size(), 0u);  // the sample is not degenerate
  }
  HostTensor q(DType::kFloat64, {mc.batch, kNq, mc.heads_q, kD}), k(DType::kFloat64, {mc.batch, kNkv, mc.heads_kv, kD}),
      v(DType::kFloat64, {mc.batch, kNkv, mc.heads_kv, kD});
  std::vector<double> qd, kd, vd;
  fill_f64(q, seed, qd);
  fill_f64(k, seed + 1, kd);
  fill_f64(v, seed + 2, vd);
  HostTensor o(DType::kFloat64, {mc.batch, kNq, mc.heads_q, kD}), lse(DType::kFloat64, {mc.batch, mc.heads_q, kNq});
  o.poison();
  lse.poison();
  const double scale = 0.1;  // not a float32 value: every CPU path must use the float64 scale as given
  execute_plan_cpu(md, q.view(), k.view(), v.view(), o.view(), lse.view(), scale);
  std::vector<double> ro, rl;
  plan_testing::dense_attention_f64(mc.mask, mc.batch, mc.heads_q, mc.heads_kv, kNq, kNkv, kD, bq, bkv, qd, kd, vd, scale,
                               ro, rl);
  std::vector<double> od(o.numel());
  for (std::int64_t i = 0; i < o.numel(); ++i) od[i] = o.get(i);
  const double err = testing::relative_l2(od.data(), ro.data(), o.numel());
  EXPECT_LE(err, 1e-12);
  // Also against the project's float64 reference (reference_attention_cpu), with mu(M) from build_mask_state_cpu.
  {
    AttentionRequest req;
    req.q = q.view();
    req.k = k.view();
    req.v = v.view();
    req.geometry = BlockGeometry{bq, bkv};
    req.scale = scale;
    const TensorView dense = make_tensor(const_cast<std::uint8_t*>(mc.mask.bits.data()), DType::kUInt8, Device::kCpu,
                                         {mc.mask.batch, mc.mask.heads, mc.mask.n_qb, mc.mask.n_kvb});
    const HostMaskState built = build_mask_state_cpu(BlockMask::from_dense(dense));
    EXPECT_EQ(built.row_offsets, ms.row_offsets);
    EXPECT_EQ(built.col_indices, ms.col_indices);
    const ReferenceOutput ref = reference_attention_cpu(req, built);
    EXPECT_LE(testing::relative_l2(od.data(), ref.o.data(), o.numel()), 1e-12);
    for (std::int64_t i = 0; i < lse.numel(); ++i) {
      const double a = lse.get(i), b = ref.lse[i];
      if (std::isinf(b)) {
        ASSERT_TRUE(std::isinf(a) && a < 0);
      } else {
        ASSERT_LE(std::abs(a - b), 1e-12 * std::max(1.0, std::abs(b)));
      }
    }
  }
  if (mc.name == "empty") {
    for (double x : od) ASSERT_EQ(x, 0.0);
  }
  for (std::int64_t i = 0; i < lse.numel(); ++i) {
    const double a = lse.get(i), b = rl[i];
    if (std::isinf(b)) {
      ASSERT_TRUE(std::isinf(a) && a < 0) << "lse " << i << " = " << a;
    } else {
      ASSERT_LE(std::abs(a - b), 1e-12 * std::max(1.0, std::abs(b))) << "lse " << i;
    }
  }
}

class PlanExecutor : public ::testing::TestWithParam<std::string> {};

// Every KV mapping x every mask kind for this Q mapping; the organization rotates so every (mapping, organization)
// pair and every (mapping, mask kind) pair is covered.
TEST_P(PlanExecutor, MatchesFloat64Reference) {
  const std::string qmap = GetParam();
  const int bq = block_for(qmap);
  std::uint64_t seed = 1000 + static_cast<std::uint64_t>(std::hash<std::string>{}(qmap) % 1000) * 100000;
  int rot = 0;
  for (const char* kvmap : kKvMaps) {
    const int bkv = block_for(kvmap);
    const auto cases = mask_cases(bq, bkv, seed);
    for (const MaskCase& mc : cases) {
      const char* org = kOrgs[rot++ % std::size(kOrgs)];
      const std::string id = "sm90a.mma.bf16.d64.q" + std::to_string(bq) + qmap + ".kv" + std::to_string(bkv) + kvmap +
                             "." + org + ".s2.w4";
      run_case(id, mc, bq, bkv, seed += 10);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(QMappings, PlanExecutor, ::testing::Values("d", "c2", "c4", "c8", "r2", "r4"),
                         [](const auto& info) { return std::string("q_") + info.param; });

TEST(PlanExecutorApi, BF16InputsAndStridedLayout) {
  // BHSD memory layout for q (strides of a [B, H, N, D] buffer viewed as [B, N, H, D]); bf16 inputs.
  DenseBlockMask m = plan_testing::random_mask(1, 2, 10, 11, 0.3, 99);
  const Plan plan = parse_plan_id("sm90a.mma.bf16.d64.q16c2.kv16p2.g1.tasc.split2.s2.w4");
  const PrepProblem pr{1, 2, 2, kNq, kNkv, 64};
  const auto md = prepare_plan_cpu(plan, plan_testing::host_mask_state(m), pr);
  HostTensor qb(DType::kBFloat16, {1, 2, kNq, kD}), k(DType::kBFloat16, {1, kNkv, 2, kD}),
      v(DType::kBFloat16, {1, kNkv, 2, kD});
  qb.fill_normal(1);
  k.fill_normal(2);
  v.fill_normal(3);
  TensorView qv = make_strided_tensor(qb.data(), DType::kBFloat16, Device::kCpu, {1, kNq, 2, kD},
                                      {2 * kNq * kD, kD, kNq * kD, 1});
  std::vector<double> qd(1 * kNq * 2 * kD), kd(k.numel()), vd(v.numel());
  for (std::int64_t i = 0; i < kNq; ++i)
    for (std::int64_t h = 0; h < 2; ++h)
      for (std::int64_t d = 0; d < kD; ++d) qd[(i * 2 + h) * kD + d] = qb.get((h * kNq + i) * kD + d);
  for (std::int64_t i = 0; i < k.numel(); ++i) kd[i] = k.get(i), vd[i] = v.get(i);
  HostTensor o(DType::kFloat64, {1, kNq, 2, kD});
  o.poison();
  execute_plan_cpu(md, qv, k.view(), v.view(), o.view());
  std::vector<double> ro, rl, od(o.numel());
  plan_testing::dense_attention_f64(m, 1, 2, 2, kNq, kNkv, kD, 16, 16, qd, kd, vd, 1.0 / std::sqrt(double(kD)), ro, rl);
  for (std::int64_t i = 0; i < o.numel(); ++i) od[i] = o.get(i);
  EXPECT_LE(testing::relative_l2(od.data(), ro.data(), o.numel()), 1e-12);
}

// Non-finite inputs: a NaN or +inf score in a row's active set gives NaN in O and LSE for exactly that row (split-KV
// merges included), the same rows as reference_attention_cpu; empty rows keep O = 0, LSE = -inf; others stay exact.
TEST(PlanExecutorApi, NonFiniteScoresGiveNaNRowsLikeReference) {
  const char* const ids[] = {"sm90a.mma.bf16.d64.q16d.kv16d.g1.tasc.split1.s2.w4",
                             "sm90a.mma.bf16.d64.q16c2.kv16p2.g1p.trun.split4.s2.w4",
                             "sm90a.mma.bf16.d64.q16d.kv32r2.g2.tdesc.split2.s2.w4",
                             "sm90a.mma.bf16.d64.q16c4.kv16c8.g4p.tasc.split8.s2.w4"};
  for (const char* id : ids) {
    for (int kind = 0; kind < 3; ++kind) {  // 0: NaN in k, 1: +inf scores, 2: NaN in q
      SCOPED_TRACE(std::string(id) + " kind " + std::to_string(kind));
      const Plan plan = parse_plan_id(id);
      const int bq = 16, bk = std::string(id).find("kv32") != std::string::npos ? 32 : 16;
      const std::int64_t nqb = (kNq + bq - 1) / bq, nkvb = (kNkv + bk - 1) / bk;
      DenseBlockMask m = plan_testing::random_mask(1, 2, nqb, nkvb, 0.4, 77 + kind);
      for (std::int64_t c = 0; c < nkvb; ++c) m.at(0, 1, 2, c) = 0;  // an empty row block
      const PrepProblem pr{1, 2, 2, kNq, kNkv, 64};
      const HostMaskState ms = plan_testing::host_mask_state(m);
      const HostTileMetadata md = prepare_plan_cpu(plan, ms, pr);
      HostTensor q(DType::kFloat64, {1, kNq, 2, kD}), k(DType::kFloat64, {1, kNkv, 2, kD}),
          v(DType::kFloat64, {1, kNkv, 2, kD});
      q.fill_normal(11);
      k.fill_normal(12);
      v.fill_normal(13);
      const double nan = std::numeric_limits<double>::quiet_NaN();
      if (kind == 0) {
        k.set((37 * 2 + 0) * kD + 3, nan);  // token 37, head 0
        k.set((100 * 2 + 1) * kD + 0, nan);  // token 100, head 1
      } else if (kind == 1) {
        for (std::int64_t d = 0; d < kD; ++d) k.set((50 * 2 + 0) * kD + d, d == 0 ? 1e308 : 0.0);
        for (std::int64_t i = 0; i < kNq; ++i) q.set((i * 2 + 0) * kD + 0, 4.0);
      } else {
        q.set((70 * 2 + 1) * kD + 2, nan);
      }
      HostTensor o(DType::kFloat64, {1, kNq, 2, kD}), lse(DType::kFloat64, {1, 2, kNq});
      o.poison();
      lse.poison();
      execute_plan_cpu(md, q.view(), k.view(), v.view(), o.view(), lse.view(), 0.75);
      AttentionRequest req;
      req.q = q.view();
      req.k = k.view();
      req.v = v.view();
      req.geometry = BlockGeometry{bq, bk};
      req.scale = 0.75f;
      const TensorView dense = make_tensor(m.bits.data(), DType::kUInt8, Device::kCpu, {1, 2, nqb, nkvb});
      const ReferenceOutput ref = reference_attention_cpu(req, build_mask_state_cpu(BlockMask::from_dense(dense)));
      std::int64_t nan_rows = 0, empty_rows = 0;
      for (std::int64_t h = 0; h < 2; ++h)
        for (std::int64_t i = 0; i < kNq; ++i) {
          const double a = lse.get(h * kNq + i), b = ref.lse[h * kNq + i];
          if (std::isnan(b)) {
            ++nan_rows;
            ASSERT_TRUE(std::isnan(a)) << "h " << h << " row " << i << " lse " << a;
            for (std::int64_t d = 0; d < kD; ++d) ASSERT_TRUE(std::isnan(o.get((i * 2 + h) * kD + d)));
          } else if (std::isinf(b)) {
            ++empty_rows;
            ASSERT_EQ(a, b) << "h " << h << " row " << i;
            for (std::int64_t d = 0; d < kD; ++d) ASSERT_EQ(o.get((i * 2 + h) * kD + d), 0.0);
          } else {
            ASSERT_NEAR(a, b, 1e-12 * std::max(1.0, std::abs(b))) << "h " << h << " row " << i;
            for (std::int64_t d = 0; d < kD; ++d)
              ASSERT_NEAR(o.get((i * 2 + h) * kD + d), ref.o[(i * 2 + h) * kD + d], 1e-11);
          }
        }
      EXPECT_GT(nan_rows, 0);
      EXPECT_GE(empty_rows, 16);
    }
  }
}

TEST(PlanExecutorApi, RejectsMismatchedTensorsWithoutWriting) {
  DenseBlockMask m = plan_testing::random_mask(1, 1, 10, 11, 0.3, 5);
  const Plan plan = parse_plan_id("sm90a.mma.bf16.d64.q16d.kv16d.g1.tasc.split1.s2.w4");
  const auto md = prepare_plan_cpu(plan, plan_testing::host_mask_state(m), PrepProblem{1, 2, 2, kNq, kNkv, 64});
  HostTensor q(DType::kFloat64, {1, kNq, 2, kD}), k(DType::kFloat64, {1, kNkv + 1, 2, kD}),
      v(DType::kFloat64, {1, kNkv, 2, kD}), o(DType::kFloat64, {1, kNq, 2, kD});
  o.poison();
  try {
    execute_plan_cpu(md, q.view(), k.view(), v.view(), o.view());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "k");
  }
  for (std::int64_t i = 0; i < o.numel(); ++i) ASSERT_TRUE(std::isnan(o.get(i)));
}

}  // namespace
}  // namespace tessera
