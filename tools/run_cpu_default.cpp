#include "run_cpu_default.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "tessera/mask_state.hpp"
#include "tessera/reference.hpp"
#include "tessera/runtime_cpu.hpp"
#include "tessera/version.hpp"
#include "tessera_corpus/case_choice.hpp"
#include "tessera_corpus/family.hpp"
#include "write_file.hpp"

namespace tessera::tools {

namespace {

constexpr std::int64_t kTokens = 768;  // per dimension, before rounding to whole blocks
constexpr std::int64_t kHeads = 2;
constexpr std::int64_t kDim = 64;

std::vector<double> random_vector(std::size_t n, std::mt19937_64& g) {
  std::normal_distribution<double> d(0, 1);
  std::vector<double> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

}  // namespace

int run_cpu_default(const std::vector<std::string>& families, const std::string& json_path, std::uint64_t seed,
                    const std::string& plan_table) {
  corpus::CorpusOptions opt;
  opt.families = families;
  nlohmann::json records = nlohmann::json::array();
  int failures = 0;
  fmt::print("{:<10} {:>6} {:>5} {:>7}  {:<50} {:>9} {:>9}\n", "family", "tokens", "heads", "density", "plan (sm90a selection)",
             "CPU ms", "rel L2");
  std::mt19937_64 gen(seed);
  std::vector<std::string> untabled_keys;  // keys of the run that the user's table has no tree for ("<key>/default")
  for (const std::string& fam : corpus::selected_families(opt)) {
    for (const int i : corpus::spread_cases(fam, "evaluation", 1, opt)) {
      const corpus::Case c = corpus::make_case(fam, i, opt);
      const std::int64_t bq = c.meta.block_q, bkv = c.meta.block_kv;
      const std::int64_t nqb = std::min<std::int64_t>(c.mask.n_qb, std::max<std::int64_t>(1, kTokens / bq));
      const std::int64_t nkvb = std::min<std::int64_t>(c.mask.n_kvb, std::max<std::int64_t>(1, kTokens / bkv));
      const std::int64_t H = std::min<std::int64_t>(c.mask.heads, kHeads);
      const std::int64_t nq = nqb * bq, nkv = nkvb * bkv;
      std::vector<std::uint8_t> dense(static_cast<std::size_t>(H * nqb * nkvb));
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t qb = 0; qb < nqb; ++qb)
          for (std::int64_t kb = 0; kb < nkvb; ++kb) dense[(h * nqb + qb) * nkvb + kb] = c.mask.get(h, qb, kb);
      auto q = random_vector(static_cast<std::size_t>(nq * H * kDim), gen);
      auto k = random_vector(static_cast<std::size_t>(nkv * H * kDim), gen);
      auto v = random_vector(static_cast<std::size_t>(nkv * H * kDim), gen);
      std::vector<double> o(q.size(), NAN), lse(static_cast<std::size_t>(H * nq), NAN);
      AttentionRequest r;
      r.q = make_tensor(q.data(), DType::kFloat64, Device::kCpu, {1, nq, H, kDim});
      r.k = make_tensor(k.data(), DType::kFloat64, Device::kCpu, {1, nkv, H, kDim});
      r.v = make_tensor(v.data(), DType::kFloat64, Device::kCpu, {1, nkv, H, kDim});
      r.o = make_tensor(o.data(), DType::kFloat64, Device::kCpu, {1, nq, H, kDim});
      r.lse = make_tensor(lse.data(), DType::kFloat64, Device::kCpu, {1, H, nq});
      r.geometry = {static_cast<int>(bq), static_cast<int>(bkv)};
      r.mask = BlockMask::from_dense(make_tensor(dense.data(), DType::kUInt8, Device::kCpu, {1, H, nqb, nkvb}));
      const auto t0 = std::chrono::steady_clock::now();
      CpuRunOptions options;
      options.plan_table_path = plan_table;
      const DispatchInfo info = run_cpu(r, options);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      const ReferenceOutput ref = reference_attention_cpu(r, build_mask_state_cpu(r.mask));
      double num = 0, den = 0;
      for (std::size_t j = 0; j < o.size(); ++j) {
        num += (o[j] - ref.o[j]) * (o[j] - ref.o[j]);
        den += ref.o[j] * ref.o[j];
      }
      const double err = den > 0 ? std::sqrt(num / den) : (num == 0 ? 0 : INFINITY);
      if (!(err <= 1e-12)) ++failures;
      fmt::print("{:<10} {:>6} {:>5} {:>7.3f}  {:<50} {:>9.1f} {:>9.1e}\n", fam, nq, H, info.stats.density, info.plan_id,
                 ms, err);
      const std::string no_tree = "/default";  // the regime of a key the table has no tree for (selector.cpp)
      if (info.regime.ends_with(no_tree)) {
        const std::string key = info.regime.substr(0, info.regime.size() - no_tree.size());
        if (std::find(untabled_keys.begin(), untabled_keys.end(), key) == untabled_keys.end()) untabled_keys.push_back(key);
      }
      records.push_back({{"family", fam}, {"source", c.meta.source_id}, {"tokens", nq}, {"heads", H},
                         {"density", info.stats.density}, {"plan", info.plan_id}, {"regime", info.regime},
                         {"table_status", info.table_status},
                         {"cpu_ms", ms}, {"rel_l2_vs_float64_reference", err}});
    }
  }
  nlohmann::json out = {{"tool", "tessera run (CPU plan executor, scaled-down default)"},
                        {"git_revision", git_revision()}, {"cases", records}};
  if (!plan_table.empty() && !untabled_keys.empty()) {
    std::string keys;
    for (const std::string& k : untabled_keys) keys += (keys.empty() ? "" : ", ") + k;
    fmt::print("tessera run: --plan-table {} has no tree for {} (the CPU default's requests are head_dim {}): the "
               "documented default plan ran for {}\n",
               plan_table, keys, kDim, untabled_keys.size() == 1 ? "it" : "them");
  }
  write_text_file(json_path, out.dump(1) + "\n", "--json");
  fmt::print("wrote {}; {} case(s), {} above 1e-12 relative L2\n", json_path, records.size(), failures);
  return failures ? 1 : 0;
}

}  // namespace tessera::tools
