// Host-side dispatch cost (DESIGN.md section 6: "within microseconds"): plan-table lookup + ranking walk with
// eligibility (select_plan), for the keys of the corpus families, with the embedded table of the architecture
// (or none: the default-plan path). Google Benchmark; host only, runs anywhere.
//   build/<preset>/bin/bench_dispatch [--benchmark_repetitions=20 --benchmark_report_aggregates_only=true]
#include <benchmark/benchmark.h>

#include <optional>

#include "core/catalog.hpp"
#include "core/embedded_tables.hpp"
#include "core/features.hpp"
#include "core/plan_table.hpp"
#include "core/selector.hpp"

namespace {

using namespace tessera;

const PlanTable* embedded_table() {
  static std::optional<PlanTable> table = []() -> std::optional<PlanTable> {
    const std::string_view js = embedded_plan_table("sm90a");
    if (js.empty()) return std::nullopt;
    return plan_table_from_json(std::string(js), std::string(catalog_version()));
  }();
  return table ? &*table : nullptr;
}

void BM_SelectPlan(benchmark::State& state) {
  EligibilityRequest r;
  r.arch = Arch::kSm90a;
  r.dtype = DType::kBFloat16;
  r.head_dim = 128;
  r.block_q = static_cast<int>(state.range(0));
  r.block_kv = static_cast<int>(state.range(1));
  const FeatureVector f{40, 75600, 0.1, 0.4, 1.7, 118};
  const PlanTable* table = embedded_table();
  SelectorCache cache;  // as the runtime keeps one: the first call fills it
  const bool memo = state.range(2) != 0;
  for (auto _ : state) {
    Selection s = select_plan(catalog(), table, r, f, memo ? &cache : nullptr);
    benchmark::DoNotOptimize(s);
  }
  state.SetLabel(std::string(table ? "embedded sm90a table" : "no table: default plan") +
                 (memo ? ", runtime memo" : ", no memo"));
}
BENCHMARK(BM_SelectPlan)->ArgNames({"B_Q", "B_KV", "memo"})
    ->Args({16, 16, 1})->Args({32, 16, 1})->Args({64, 64, 1})->Args({128, 128, 1})->Args({384, 384, 1})
    ->Args({64, 64, 0});

void BM_TableLookupOnly(benchmark::State& state) {
  const PlanTable* table = embedded_table();
  if (!table) {
    state.SkipWithError("no embedded sm90a table in this build");
    return;
  }
  const FeatureVector f{40, 75600, 0.1, 0.4, 1.7, 118};
  for (auto _ : state) benchmark::DoNotOptimize(table->lookup("sm90a.bf16.d128.q64.kv64", f));
}
BENCHMARK(BM_TableLookupOnly);

}  // namespace

BENCHMARK_MAIN();
