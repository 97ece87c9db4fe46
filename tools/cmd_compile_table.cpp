// `tessera compile-table`: profile records -> plan table artifact (docs/selection.md), with the regret on the
// evaluation split against the fastest measured plan, and the speedup over Direct.
#include <fmt/core.h>

#include <algorithm>
#include <optional>

#include "commands.hpp"
#include "write_file.hpp"
#include "core/catalog.hpp"
#include "core/profile_file.hpp"
#include "core/profile_record_check.hpp"
#include "core/table_compiler.hpp"
#include "tessera/error.hpp"

namespace tessera::tools {

namespace {

struct CompileArgs {
  std::string in = "profile.jsonl";
  std::string out = "plan_table.json";
  std::string arch = "sm90a";
  std::string gpu_name;
  int min_leaf = 32;
  int max_depth = 6;
  std::optional<std::string> eval_report;  // CSV of the evaluation split, one row per case (given: even if empty)
};

/// CSV, one row per evaluation case: case, key, source, selected plan and its latency (us), fastest plan and its
/// latency (us), regret.
void write_eval_report(const std::string& path, const RegretReport& rep) {
  std::string csv = "case,key,source,selected_plan,selected_us,best_plan,best_us,regret\n";
  for (const CaseRegret& c : rep.per_case)
    csv += fmt::format("{},{},{},{},{:.3f},{},{:.3f},{:.5f}\n", c.case_id, c.key, c.source, c.selected_plan,
                       c.selected_us, c.best_plan, c.best_us, c.regret);
  write_text_file(path, csv, "--eval-report");
}

void run_compile(const CompileArgs& a) {
  if (!is_known_arch(a.arch))
    throw Error(ErrorCode::kInvalidArgument, "--arch",
                fmt::format("unknown architecture '{}' (sm80, sm86, sm89, sm90a, sm120)", a.arch));
  check_output_dir(a.out, "--out");
  check_not_input(a.out, a.in, "--out", "--in");
  if (a.eval_report)  // distinct from --out also as ./t.json, through links and hard links
    check_extra_output(*a.eval_report, "--eval-report", a.out, "--out", a.in, "--in");
  const std::vector<ProfileRecord> records = read_profile_records(a.in, a.arch);
  if (std::none_of(records.begin(), records.end(), [](const ProfileRecord& r) { return r.valid; }))
    throw Error(ErrorCode::kFormatError, "--in",
                fmt::format("{}: none of its {} records is valid (\"valid\": true)", a.in, records.size()));
  CompileOptions opt;
  opt.min_leaf_cases = a.min_leaf;
  opt.max_depth = a.max_depth;
  std::map<std::string, std::string> direct;
  for (const ProfileRecord& r : records) {
    if (r.role == "default" || r.role == "default,direct") opt.base_plans[r.key] = r.plan;
    if (r.role == "direct" || r.role == "default,direct") direct[r.key] = r.plan;
  }
  std::vector<KeyReport> reports;
  PlanTable table = compile_plan_table(records, opt, &reports);
  table.catalog_version = std::string(catalog_version());
  table.arch = a.arch;
  table.gpu_name = a.gpu_name;
  write_text_file(a.out, plan_table_to_json(table) + "\n", "--out");
  fmt::print("{} records; {} keys -> {}\n", records.size(), table.trees.size(), a.out);
  for (const auto& [key, tree] : table.trees)  // docs/selection.md: the fallback when no record names the default
    if (!opt.base_plans.count(key))
      fmt::print(stderr, "note: no record of key {} has \"role\": \"default\"; its base plan (the end of every "
                 "ranking) is the plan measured valid on the most cases, fastest geometric mean: {}\n", key,
                 tree.base_plan);
  fmt::print("{:<28} {:>6} {:>6} {:>7}  {}\n", "key", "cases", "depth", "leaves", "cv log-regret by depth");
  for (const KeyReport& k : reports) {
    std::string cv;
    for (double x : k.cv_log_regret) cv += fmt::format("{:.4f} ", x);
    fmt::print("{:<28} {:>6} {:>6} {:>7}  {}\n", k.key, k.cases, k.chosen_depth, k.leaves, cv.empty() ? "(one request: no CV)" : cv);
  }
  std::vector<ProfileRecord> eval;
  for (const ProfileRecord& r : records)
    if (r.split == "eval") eval.push_back(r);
  const RegretReport rep = evaluate_plan_table(table, eval, direct);
  fmt::print("evaluation split: {} cases ({} with no tree for their key)\n", rep.cases, rep.cases_missing_key);
  if (a.eval_report) {  // written even with no scored case (header only), so an asked-for file exists
    write_eval_report(*a.eval_report, rep);
    fmt::print("per-case regret ({} cases) -> {}\n", rep.per_case.size(), *a.eval_report);
  }
  if (rep.cases == 0) {  // RegretReport's figures default to 1: printing them would claim a perfect table
    fmt::print("regret and speedup over Direct: not computed: {}\n",
               eval.empty() ? "the records hold no evaluation-split case (\"split\": \"eval\")"
                            : "no evaluation-split case has a tree for its key");
    return;
  }
  fmt::print("regret vs fastest measured plan: geomean {:.4f}, P95 {:.4f}, P99 {:.4f}, max {:.4f}\n", rep.geomean_regret,
             rep.p95_regret, rep.p99_regret, rep.max_regret);
  if (direct.empty())
    fmt::print("kernel speedup over Direct (T = B): not computed: no record has \"role\": \"direct\"\n");
  else
    fmt::print("kernel speedup of the selected plan over Direct (T = B): geomean {:.3f}x over {} cases\n",
               rep.geomean_speedup_over_direct, rep.direct_cases);
}

}  // namespace

void add_compile_table_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("compile-table", "Compile profile records into a plan table artifact");
  auto a = std::make_shared<CompileArgs>();
  cmd->add_option("--in", a->in, "Profile records (JSON lines from `tessera profile`)");
  cmd->add_option("--out", a->out, "Plan table artifact to write (JSON)");
  cmd->add_option("--arch", a->arch, "Architecture the records were profiled on");
  cmd->add_option("--gpu-name", a->gpu_name, "GPU name to record in the artifact");
  cmd->add_option("--min-leaf", a->min_leaf, "Minimum cases per leaf")->check(CLI::Range(1, 100000));
  cmd->add_option("--max-depth", a->max_depth, "Largest tree depth tried by cross-validation")->check(CLI::Range(0, 16));
  cmd->add_option("--eval-report", a->eval_report,
                  "Also write the evaluation split's per-case regret here (CSV: case, key, source, selected plan, "
                  "its latency in us, fastest plan, its latency in us, regret)");
  cmd->callback([a] { run_compile(*a); });
}

}  // namespace tessera::tools
