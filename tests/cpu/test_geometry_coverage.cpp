// Every block geometry that request validation accepts (B_Q, B_KV multiples of 16 in [16, 1024]) has an eligible plan
// for every dtype and head_dim of the catalog on every architecture (issue #19 item 3; DESIGN.md section 3 promises
// any multiple of 16), with and without the embedded table; and run_cpu computes the reference on a sample of the
// geometries that only the general Refined factors serve (48 = 3 x 16, 80 = 5 x 16, 1024 = 64 x 16, ...).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/catalog.hpp"
#include "core/embedded_tables.hpp"
#include "core/plan_table.hpp"
#include "core/selector.hpp"
#include "host_tensor.hpp"
#include "mask_gen.hpp"
#include "tessera/error.hpp"
#include "tessera/mask_state.hpp"
#include "tessera/reference.hpp"
#include "tessera/runtime_cpu.hpp"

namespace tessera {
namespace {

TEST(GeometryCoverage, EveryAcceptedBlockGeometryHasAnEligiblePlanOnEveryArchitecture) {
  const std::string_view js = embedded_plan_table("sm90a");
  std::optional<PlanTable> table;
  if (!js.empty()) table = plan_table_from_json(std::string(js), std::string(catalog_version()));
  const FeatureVector features{16, 32768, 0.1, 0.5, 2, 50, 1.2};
  int checked = 0;
  for (Arch arch : {Arch::kSm80, Arch::kSm86, Arch::kSm89, Arch::kSm90a, Arch::kSm120}) {
    for (DType dt : {DType::kBFloat16, DType::kFloat16}) {
      for (int d : {64, 128}) {
        SelectorCache cache;
        for (int bq = 16; bq <= 1024; bq += 16) {
          for (int bkv = 16; bkv <= 1024; bkv += 16) {
            EligibilityRequest r;
            r.arch = arch, r.dtype = dt, r.head_dim = d, r.block_q = bq, r.block_kv = bkv;
            const PlanTable* t = arch == Arch::kSm90a && table ? &*table : nullptr;
            Selection sel;
            try {
              sel = select_plan(catalog(), t, r, features, &cache);
            } catch (const Error& e) {
              ADD_FAILURE() << request_key(r).str() << ": " << e.what();
              continue;
            }
            const CatalogEntry* e = find_plan_entry(sel.plan, catalog());
            ASSERT_NE(e, nullptr) << sel.plan_id;
            const Eligibility ok = eligible(sel.plan, *e, r);
            ASSERT_TRUE(ok.ok) << request_key(r).str() << " -> " << sel.plan_id << ": " << ok.reason;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 5 * 2 * 2 * 64 * 64);
}

// Refined factors outside {2, 3, 4, 6, 8} parse, print and pass check_plan; factors that leave no multiple-of-16 tile
// and factors past 64 are rejected by the parser, naming the id and the field.
TEST(GeometryCoverage, GeneralRefinedFactorsRoundTripThroughThePlanId) {
  for (const char* id : {"sm90a.mma.bf16.d128.q48r3.kv80r5.g1.tasc.split1.s2.w1",
                         "sm90a.mma.f16.d64.q1024r64.kv208r13.g1.tasc.split1.s2.w1"}) {
    const Plan p = parse_plan_id(id);
    EXPECT_EQ(plan_id(p), id);
    EXPECT_EQ(p.tile_q(), 16);
    EXPECT_EQ(p.tile_kv(), 16);
  }
  for (const char* id : {"sm90a.mma.bf16.d128.q80r4.kv64d.g1.tasc.split1.s2.w1",    // 80 / 4 = 20
                         "sm90a.mma.bf16.d128.q96r12.kv64d.g1.tasc.split1.s2.w1",   // 96 / 12 = 8
                         "sm90a.mma.bf16.d128.q1024r128.kv64d.g1.tasc.split1.s2.w1"}) {
    try {
      (void)parse_plan_id(id);
      ADD_FAILURE() << id << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), "plan_id") << e.what();
      EXPECT_NE(std::string(e.what()).find("plan.q.factor"), std::string::npos) << e.what();
    }
  }
}

// run_cpu (selection, CPU launch preparation, float64 executor) equals the reference where only a general Refined
// factor gives a plan, for both dtypes and head_dims, with ragged last blocks.
TEST(GeometryCoverage, RunCpuMatchesTheReferenceOnGeometriesOnlyGeneralRefinementServes) {
  struct G { int bq, bkv; DType dt; int d; };
  const std::vector<G> geos = {{48, 80, DType::kBFloat16, 128}, {80, 48, DType::kFloat16, 64},
                               {112, 16, DType::kBFloat16, 64}, {16, 208, DType::kFloat16, 128},
                               {240, 176, DType::kBFloat16, 64}, {1024, 48, DType::kFloat16, 64}};
  std::mt19937_64 g(20261202);
  for (const G& geo : geos) {
    SCOPED_TRACE(std::to_string(geo.bq) + "x" + std::to_string(geo.bkv));
    const std::int64_t n = 2 * std::max(geo.bq, geo.bkv) + 40, hq = 2, hkv = 1;
    testing::HostTensor q(geo.dt, {1, n, hq, geo.d}), k(geo.dt, {1, n, hkv, geo.d}), v(geo.dt, {1, n, hkv, geo.d}),
        o(DType::kFloat64, {1, n, hq, geo.d}), lse(DType::kFloat32, {1, hq, n});
    q.fill_normal(g()), k.fill_normal(g()), v.fill_normal(g());
    o.poison(), lse.poison();
    const MaskShape s{1, hq, (n + geo.bq - 1) / geo.bq, (n + geo.bkv - 1) / geo.bkv};
    const testing::HostMaskTensors mask =
        testing::encode_csr(s, testing::random_mask_bits(s, testing::MaskPattern::kRandom, 0.5, g));
    AttentionRequest req;
    req.q = q.view(), req.k = k.view(), req.v = v.view(), req.o = o.view(), req.lse = lse.view();
    req.geometry = {geo.bq, geo.bkv};
    req.mask = mask.mask;
    const DispatchInfo info = run_cpu(req);
    const ReferenceOutput ref = reference_attention_cpu(req, build_mask_state_cpu(req.mask));
    std::vector<double> got(ref.o.size());
    for (std::size_t i = 0; i < got.size(); ++i) got[i] = o.get(static_cast<std::int64_t>(i));
    EXPECT_LE(testing::relative_l2(got.data(), ref.o.data(), static_cast<std::int64_t>(got.size())), 1e-12)
        << info.plan_id;
    int bad = 0;
    for (std::size_t i = 0; i < ref.lse.size(); ++i) {
      const double x = lse.get(static_cast<std::int64_t>(i)), want = ref.lse[i];
      const bool ok = std::isinf(want) ? (std::isinf(x) && x < 0) : std::abs(x - want) <= 1e-5 * std::max(1.0, std::abs(want));
      bad += !ok;
    }
    EXPECT_EQ(bad, 0) << info.plan_id;
  }
}

}  // namespace
}  // namespace tessera
