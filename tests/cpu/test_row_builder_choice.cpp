// prep::prefer_row_aligned: the automatic tile-row layout choice (core/row_builder_choice.hpp), on the parameters
// the plan ids give (make_prep_params).
#include <gtest/gtest.h>

#include <string>

#include "core/launch_prep.hpp"
#include "core/plan.hpp"
#include "core/row_builder_choice.hpp"

namespace tessera {
namespace {

bool prefers_aligned(const std::string& mappings, const std::string& traversal = "tasc") {
  const Plan plan = parse_plan_id("sm90a.mma.bf16.d128." + mappings + ".g1." + traversal + ".split1.s2.w4");
  const MaskShape shape{1, 4, 100, 100};
  const PrepProblem problem{1, 4, 4, 6400, 6400, 128};
  return prep::prefer_row_aligned(make_prep_params(plan, shape, problem));
}

TEST(RowBuilderChoice, RowAlignedWhereOffsetsAreNotTheMasksInLinearOrders) {
  for (const char* m : {"q64d.kv64c2", "q64d.kv64c4", "q64d.kv64c8", "q64d.kv64p2", "q64d.kv64p4", "q64d.kv64p8",
                        "q64d.kv64r2", "q64d.kv64r4", "q64r2.kv64r2", "q64r4.kv64c2", "q64c2.kv64d", "q64c2.kv64c2",
                        "q64c2.kv64p2", "q64c4.kv64d"}) {
    EXPECT_TRUE(prefers_aligned(m)) << m;
    EXPECT_TRUE(prefers_aligned(m, "tdesc")) << m;
  }
}

TEST(RowBuilderChoice, CompactForMaskOffsetsAndRunMajor) {
  // Direct KV with c_q = 1 (Direct or Refined Q): the tile rows are mu(M)'s CSR itself.
  for (const char* m : {"q64d.kv64d", "q64r2.kv64d"}) {
    EXPECT_FALSE(prefers_aligned(m)) << m;
    EXPECT_FALSE(prefers_aligned(m, "tdesc")) << m;
  }
  // Run-major rows are compact (the streaming kernel's run-major emission, the c_q > 1 reorder).
  EXPECT_FALSE(prefers_aligned("q64d.kv64c2", "trun"));
  EXPECT_FALSE(prefers_aligned("q64c2.kv64c2", "trun"));
}

}  // namespace
}  // namespace tessera
