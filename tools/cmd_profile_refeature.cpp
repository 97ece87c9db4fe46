// `tessera profile-refeature` (CPU): re-derives the features of profile records under the current feature schema by
// regenerating each case's mask from its id and counting it with the CPU mu(M) (docs/selection.md), so a schema
// change can be compiled and evaluated on records profiled earlier without a GPU.
#include <fmt/core.h>

#include <chrono>
#include <optional>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "core/profile_file.hpp"
#include "core/profile_record_check.hpp"
#include "core/table_compiler.hpp"
#include "tessera/error.hpp"
#include "tessera_corpus/profile_inputs.hpp"
#include "tessera_corpus/profile_refeature.hpp"
#include "tessera_corpus/sta.hpp"
#include "write_file.hpp"

namespace tessera::tools {

namespace {

struct RefeatureArgs {
  std::string in;
  std::string out;
  std::optional<std::string> case_stats;  // given: even if empty
  std::string sta_table;
  std::vector<std::string> masks;  ///< mask files or directories holding the cases of `tessera profile --masks` records
  int threads = 0;
};

std::string case_stats_line(const std::string& id, const MaskStats& s) {
  const nlohmann::json j = {
      {"case", id},
      {"shape", {{"batch", s.shape.batch}, {"heads", s.shape.heads}, {"n_qb", s.shape.n_qb}, {"n_kvb", s.shape.n_kvb}}},
      {"counters",
       {{"active_blocks", s.counters.active_blocks},
        {"runs", s.counters.runs},
        {"blocks_in_long_runs", s.counters.blocks_in_long_runs},
        {"max_row_active", s.counters.max_row_active},
        {"empty_rows", s.counters.empty_rows},
        {"coarsened_pairs", s.counters.coarsened_pairs}}}};
  return j.dump();
}

/// Reads the STA table before any case is regenerated when --sta-table is given or a record is an STA-real case,
/// so a missing or malformed table is reported under --sta-table (with its own error code), not as a failed case
/// of --in.
void check_sta_table_first(const RefeatureArgs& a, const std::vector<ProfileRecord>& records) {
  bool needed = !a.sta_table.empty();
  for (const ProfileRecord& r : records) needed = needed || parse_profile_case_id(r.case_id).family == "STA-real";
  if (!needed) return;
  corpus::CorpusOptions opt;
  opt.sta_table = a.sta_table;
  opt.families = {"STA-real"};
  try {
    corpus::check_inputs(opt);
  } catch (const Error& e) {
    const std::string path = a.sta_table.empty() ? corpus::default_sta_table_path() : a.sta_table;
    const bool named = path.empty() || e.message().find(path) != std::string::npos;
    throw Error(e.code(), a.sta_table.empty() ? "sta_table" : "--sta-table",
                named ? e.message() : fmt::format("'{}': {}", path, e.message()));
  }
}

void run_refeature(const RefeatureArgs& a) {
  // Both outputs are checked before anything is read or written, so a bad --case-stats never leaves --out written.
  check_output_dir(a.out, "--out");
  check_not_input(a.out, a.in, "--out", "--in");
  if (a.case_stats) check_extra_output(*a.case_stats, "--case-stats", a.out, "--out", a.in, "--in");
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<FeaturePresence> present;
  std::vector<ProfileRecord> records = read_profile_records(a.in, "", &present, /*need_profiling=*/false);
  check_sta_table_first(a, records);
  corpus::CorpusOptions opt;
  opt.sta_table = a.sta_table;
  std::map<std::string, MaskStats> stats;
  std::map<std::string, std::string> files;
  if (!a.masks.empty())
    for (const corpus::MaskFileInput& in : corpus::list_mask_files(a.masks, {"profiling", "evaluation"})) {
      // Nothing is written yet: an output that is one of the mask files would overwrite an input.
      check_not_input(a.out, in.path, "--out", "--masks");
      if (a.case_stats) check_not_input(*a.case_stats, in.path, "--case-stats", "--masks");
      files.emplace(in.case_id, in.path);
    }
  int cases = 0;
  try {
    cases = corpus::refeature_records(records, present, opt, a.threads, a.case_stats ? &stats : nullptr, files);
  } catch (const Error& e) {  // a case that does not match the corpus: name the input file
    if (e.argument() != "records") throw;
    throw Error(e.code(), "--in", fmt::format("{}: {}", a.in, e.message()));
  }
  std::string text;
  for (const ProfileRecord& r : records) text += profile_record_to_json(r) + "\n";
  std::string lines;
  for (const auto& [id, s] : stats) lines += case_stats_line(id, s) + "\n";
  write_text_file(a.out, text, "--out");
  if (a.case_stats) write_text_file(*a.case_stats, lines, "--case-stats");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("{} records of {} cases re-featured -> {} ({:.0f} s)\n", records.size(), cases, a.out, s);
}

}  // namespace

void add_profile_refeature_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "profile-refeature",
      "Re-derive the features of profile records under the current schema (CPU: regenerates each case's mask)");
  auto a = std::make_shared<RefeatureArgs>();
  cmd->add_option("--in", a->in, "Profile records (JSON lines from `tessera profile`, any older feature schema)")
      ->required();
  cmd->add_option("--out", a->out, "Records to write, with the current schema's features")->required();
  cmd->add_option("--case-stats", a->case_stats,
                  "Also write each case's mu(M) shape and counters (one JSON line per case) for offline analysis");
  cmd->add_option("--sta-table", a->sta_table, "Real STA table for STA-real cases (default: the repository's)");
  cmd->add_option("--threads", a->threads, "Worker threads (0 = all cores)")->check(CLI::Range(0, 1024));
  cmd->add_option("--masks", a->masks,
                  "Mask files or directories of .safetensors files whose cases some records name (records of "
                  "`tessera profile --masks`): those cases are read from the files instead of regenerated");
  cmd->callback([a] { run_refeature(*a); });
}

}  // namespace tessera::tools
