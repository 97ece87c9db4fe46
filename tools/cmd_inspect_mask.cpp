// `tessera inspect-mask FILE`: metadata and statistics of one mask file.
#include <fmt/core.h>

#include "commands.hpp"
#include "tessera/error.hpp"
#include "tessera_corpus/case_stats.hpp"
#include "tessera_corpus/mask_file.hpp"
#include "tessera_corpus/packed_mask.hpp"

namespace tessera::tools {

void add_inspect_mask_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect-mask", "Print the metadata and statistics of a mask file");
  static std::string file;
  static bool per_head = false;
  cmd->add_option("file", file, "Mask file (.safetensors)")->required();
  cmd->add_flag("--per-head", per_head, "Statistics per head");
  cmd->callback([] {
    if (file.empty()) throw Error(ErrorCode::kIoError, "file", "the mask file path is empty");
    const corpus::Case c = corpus::read_mask_file(file);
    const auto& m = c.meta;
    fmt::print("file:        {}\n", file);
    fmt::print("family:      {}  source: {}  kind: {}\n", m.family, m.source_id, m.kind);
    fmt::print("model:       {}  sparsifier: {}  token order: {}\n", m.model, m.sparsifier, m.token_order);
    fmt::print("geometry:    N_q={} N_kv={} (real tokens {})  B=({},{})  blocks {}x{}\n", m.n_q, m.n_kv, m.tokens_real,
               m.block_q, m.block_kv, c.mask.n_qb, c.mask.n_kvb);
    fmt::print("case:        heads={} [{}] step={} layer={} chunk={} index={} seed={} split={}\n", m.heads, m.head_ids,
               m.step, m.layer, m.chunk, m.index, m.seed, m.split);
    const corpus::OwnedBlockMask owned(c.mask);  // the library's BlockMask view of the file
    const auto s = corpus::case_stats(c.mask, m.block_q, m.block_kv);
    fmt::print("BlockMask:   dense uint8 [{}, {}, {}, {}]\n", owned.mask().batch, owned.mask().heads, owned.mask().n_qb,
               owned.mask().n_kvb);
    fmt::print("density:     {:.4f} ({} of {} blocks)\n", s.density(), s.active, s.blocks);
    fmt::print("rows:        {} (empty {}), blocks per row min {} max {} mean {:.1f}\n", s.rows, s.empty_rows, s.min_row,
               s.max_row, s.rows ? double(s.active) / double(s.rows) : 0.0);
    fmt::print("runs:        {:.2f} per row, mean length {:.2f}; diagonal inclusion {:.4f}\n", s.runs_per_row(),
               s.runs ? double(s.active) / double(s.runs) : 0.0, s.diag_inclusion());
    fmt::print("run lengths:");
    for (int b = 0; b < corpus::kRunBuckets; ++b) fmt::print(" {}:{}", corpus::run_bucket_label(b), s.run_hist[std::size_t(b)]);
    fmt::print("\nnotes:       {}\n", m.notes);
    if (per_head) {
      for (std::int64_t h = 0; h < c.mask.heads; ++h) {
        corpus::PackedMask one(1, c.mask.n_qb, c.mask.n_kvb);
        std::copy_n(c.mask.row(h, 0), c.mask.n_qb * c.mask.row_bytes, one.bits.begin());
        const auto hs = corpus::case_stats(one, m.block_q, m.block_kv);
        fmt::print("  head {:>3}: density {:.4f} runs/row {:.2f} blocks/row {}-{}\n", h, hs.density(), hs.runs_per_row(),
                   hs.min_row, hs.max_row);
      }
    }
  });
}

}  // namespace tessera::tools
