// `tessera masks generate|stats|render`: the mask corpus (docs/corpus.md).
#include <fmt/core.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "families_option.hpp"
#include "seed_option.hpp"
#include "subcommand_required.hpp"
#include "write_file.hpp"
#include "tessera/error.hpp"
#include "tessera_corpus/case_stats.hpp"
#include "tessera_corpus/corpus_writer.hpp"
#include "tessera_corpus/family.hpp"
#include "tessera_corpus/mask_file.hpp"
#include "tessera_corpus/render.hpp"

namespace tessera::tools {

namespace {
namespace fs = std::filesystem;
using corpus::CaseStats;

std::vector<std::string> mask_files(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const auto& in : inputs) {
    if (fs::is_directory(in)) {
      const std::size_t before = files.size();
      for (const auto& e : fs::recursive_directory_iterator(in))
        if (e.is_regular_file() && e.path().extension() == ".safetensors") files.push_back(e.path().string());
      if (files.size() == before)
        throw Error(ErrorCode::kInvalidArgument, "inputs", fmt::format("no mask files (*.safetensors) in '{}'", in));
    } else if (fs::exists(in)) {  // a file, or a pipe such as <(cat f): read_mask_file says if it is not a mask file
      files.push_back(in);
    } else {
      throw Error(ErrorCode::kInvalidArgument, "inputs", fmt::format("'{}' does not exist", in));
    }
  }
  std::sort(files.begin(), files.end());
  // A file named twice (directly, or through two of the inputs) would be counted twice: an error, as for
  // `run --families X X`.
  std::set<fs::path> seen;
  for (const auto& f : files) {
    std::error_code ec;
    const fs::path key = fs::weakly_canonical(f, ec);
    if (!seen.insert(ec ? fs::path(f) : key).second)
      throw Error(ErrorCode::kInvalidArgument, "inputs", fmt::format("'{}' is given more than once", f));
  }
  return files;
}

void print_stats_row(const std::string& name, int cases, const CaseStats& s) {
  fmt::print("{:<12} {:>6} {:>8.4f} {:>9.2f} {:>8} {:>8} {:>7} {:>8.4f}  ", name, cases, s.density(), s.runs_per_row(),
             s.min_row, s.max_row, s.empty_rows, s.diag_inclusion());
  for (int b = 0; b < corpus::kRunBuckets; ++b)
    fmt::print("{}{:.3f}", b ? " " : "", s.runs ? double(s.run_hist[std::size_t(b)]) / double(s.runs) : 0.0);
  fmt::print("\n");
}
}  // namespace

void add_masks_command(CLI::App& app) {
  auto* masks = app.add_subcommand("masks", "Mask corpus: generate, statistics, render");
  require_one_subcommand(masks);

  auto* gen = masks->add_subcommand("generate", "Generate the mask corpus (deterministic by seed)");
  static std::string out;
  static std::string seed = "0";
  static std::vector<std::string> fams;
  static bool small = false;
  static int threads = 0;
  static std::string sta_table;
  gen->add_option("--out", out, "Output directory")->required();
  gen->add_option("--seed", seed, "Seed of every synthetic case (default 0)");
  gen->add_option("--families", fams, "Families to generate, space- or comma-separated (default: all)")->delimiter(',');
  gen->add_flag("--small", small, "Scaled-down corpus (CI)");
  gen->add_option("--threads", threads, "Worker threads, 1..1024 (default: all cores; never more than the cases)")
      ->check(CLI::Range(1, 1024))
      ->default_str("all cores");
  gen->add_option("--sta-table", sta_table,
                  "Real STA table JSON (default: $TESSERA_STA_TABLE, else corpus/data, else shared/masks)");
  static bool whole = false;
  static std::string req_split = "evaluation";
  static int per_family = 4;
  gen->add_flag("--whole-requests", whole,
                "Write whole requests instead of the corpus: chosen cases with every head of the model's layer");
  auto* split_opt = gen->add_option("--split", req_split, "With --whole-requests: profiling or evaluation (default evaluation)");
  auto* cpf_opt = gen->add_option("--cases-per-family", per_family,
                                  "With --whole-requests: requests per family, 1..100000 (default 4; fewer when the "
                                  "split has fewer cases)")
                      ->check(CLI::Range(1, 100000));
  gen->callback([split_opt, cpf_opt] {
    if (!whole) {  // options of whole requests alone would be ignored silently
      if (split_opt->count()) throw Error(ErrorCode::kInvalidArgument, "--split", "only with --whole-requests");
      if (cpf_opt->count()) throw Error(ErrorCode::kInvalidArgument, "--cases-per-family", "only with --whole-requests");
    } else if (req_split != "profiling" && req_split != "evaluation") {
      throw Error(ErrorCode::kInvalidArgument, "--split",
                  fmt::format("unknown split '{}' (the corpus splits are 'profiling' and 'evaluation')", req_split));
    }
    corpus::CorpusOptions opt;
    opt.seed = parse_seed(seed, "--seed");
    opt.small = small;
    opt.families = fams;
    opt.sta_table = sta_table;
    (void)families_option(opt);  // unknown or repeated families: an error naming --families, before any output
    {  // a corpus directory is written whole: never mixed into an earlier corpus (its manifest would be replaced)
      namespace fs = std::filesystem;
      std::error_code ec;
      if (fs::exists(out, ec) && !fs::is_directory(out, ec))
        throw Error(ErrorCode::kIoError, "--out", fmt::format("'{}' exists and is not a directory", out));
      if (fs::is_directory(out, ec) && !fs::is_empty(out, ec))
        throw Error(ErrorCode::kIoError, "--out",
                    fmt::format("'{}' is not empty: write the corpus to a new or empty directory", out));
    }
    check_output_directory(out, "--out");  // e.g. /sys/corp: refused before any case is generated
    const auto t0 = std::chrono::steady_clock::now();
    corpus::CorpusSummary s;
    try {
      const auto log = [](const std::string& m) { fmt::print("{}\n", m); };
      s = whole ? corpus::write_whole_requests(out, opt, req_split, per_family, threads, log)
                : corpus::write_corpus(out, opt, threads, log);
    } catch (const Error& e) {  // the library names its parameter: name the option
      if (e.argument() == "out") throw Error(e.code(), "--out", e.message());
      if (e.argument() == "sta_table") throw Error(e.code(), "--sta-table", e.message());
      throw;
    }
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("wrote {} {} to {} in {:.1f} s\n", s.cases, whole ? "whole requests" : "cases", out, sec);
  });

  auto* st = masks->add_subcommand("stats", "Statistics of mask files or corpus directories, per family");
  static std::vector<std::string> stat_inputs;
  static bool per_file = false;
  st->add_option("inputs", stat_inputs, "Mask files or directories")->required();
  st->add_flag("--per-file", per_file, "One line per file as well");
  st->callback([] {
    std::map<std::string, std::pair<int, CaseStats>> fam;
    std::map<std::string, std::pair<int, CaseStats>> src;
    std::map<std::string, int> split;
    const std::vector<std::string> files = mask_files(stat_inputs);  // before any output: none found is an error
    // Every file is read before anything is printed, so that a bad file fails the command with no partial table.
    std::vector<std::pair<corpus::CaseMeta, CaseStats>> read;
    read.reserve(files.size());
    for (const auto& f : files) {
      const corpus::Case c = corpus::read_mask_file(f);
      read.emplace_back(c.meta, corpus::case_stats(c.mask, c.meta.block_q, c.meta.block_kv));
    }
    fmt::print("{:<12} {:>6} {:>8} {:>9} {:>8} {:>8} {:>7} {:>8}  run-length histogram (fraction of runs: ", "family",
               "cases", "density", "runs/row", "min/row", "max/row", "empty", "diag");
    for (int b = 0; b < corpus::kRunBuckets; ++b) fmt::print("{}{}", b ? " " : "", corpus::run_bucket_label(b));
    fmt::print(")\n");
    for (std::size_t i = 0; i < files.size(); ++i) {
      const corpus::CaseMeta& meta = read[i].first;
      const CaseStats& s = read[i].second;
      if (per_file) print_stats_row(fs::path(files[i]).filename().string(), 1, s);
      auto& e = fam[meta.family];
      ++e.first;
      e.second.add(s);
      auto& g = src[meta.family + " / " + meta.source_id];
      ++g.first;
      g.second.add(s);
      ++split[meta.split];
    }
    for (const auto& [name, e] : fam) print_stats_row(name, e.first, e.second);
    fmt::print("\nper source (cases, density, runs/row, min/max blocks per row):\n");
    for (const auto& [name, e] : src)
      fmt::print("  {:<40} {:>5} {:>8.4f} {:>8.2f} {:>6} {:>6}\n", name, e.first, e.second.density(),
                 e.second.runs_per_row(), e.second.min_row, e.second.max_row);
    fmt::print("\nsplits:");
    for (const auto& [name, n] : split) fmt::print(" {}={}", name, n);
    fmt::print("\n");
  });

  auto* rd = masks->add_subcommand("render", "Write a PNG of one head of a mask file");
  static std::string rfile, rout;
  static std::int64_t rhead = 0;
  static int rpx = 512;
  rd->add_option("file", rfile, "Mask file (.safetensors)")->required();
  rd->add_option("--out", rout, "PNG path")->required();
  rd->add_option("--head", rhead, "Head to render (default 0)")->check(CLI::Range(std::int64_t{0}, std::int64_t{2147483647}));
  rd->add_option("--max-px", rpx, "Longer side in pixels (default 512)")->check(CLI::Range(16, 8192));
  rd->callback([] {
    check_output_dir(rout, "--out");
    check_not_input(rout, rfile, "--out", "mask");  // the PNG would replace the mask it is rendered from
    const corpus::Case c = corpus::read_mask_file(rfile);
    if (rhead >= c.mask.heads)
      throw Error(ErrorCode::kInvalidArgument, "--head",
                  fmt::format("head {} outside [0, {}) of '{}'", rhead, c.mask.heads, rfile));
    try {
      corpus::render_mask_png(c.mask, rhead, rout, rpx);
    } catch (const Error& e) {  // the library names its parameter: name the option
      if (e.argument() != "path") throw;
      throw Error(e.code(), "--out", e.message());
    }
    fmt::print("{}: {} {} head {} ({}x{} blocks) -> {}\n", rfile, c.meta.family, c.meta.source_id, rhead, c.mask.n_qb,
               c.mask.n_kvb, rout);
  });
}

}  // namespace tessera::tools
