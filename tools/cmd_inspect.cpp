// `tessera inspect catalog`: the kernel catalog (every entry of src/kernels/catalog.def) with its target
// architectures (family targets whose shared-memory limit the entry fits) and an example plan id per entry.
// `tessera inspect plan <id>`: a plan id parsed into its parts, its tiles and its catalog entry (exit 1 when no
// catalog entry runs it, or when the entry cannot launch on the plan's arch).
#include <fmt/core.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <regex>
#include <span>
#include <string>
#include <vector>

#include "commands.hpp"
#include "subcommand_required.hpp"
#include "core/arch_limits.hpp"
#include "core/catalog.hpp"
#include "core/launch_prep.hpp"
#include "core/plan.hpp"
#include "core/row_builder_choice.hpp"
#include "cuda/launch_prep_kernels.cuh"
#include "tessera/error.hpp"
#include "tessera/version.hpp"

namespace tessera::tools {

namespace {

std::string archs_text(std::span<const Arch> archs) {
  std::string s;
  for (Arch a : archs) s += (s.empty() ? "" : ",") + std::string(arch_name(a));
  return s;
}

std::string mapping_text(const DimMapping& m, int block) {
  switch (m.kind) {
    case MappingKind::kDirect: return fmt::format("Direct (T = B = {})", block);
    case MappingKind::kCoarsen: return fmt::format("Coarsened span x{} (T = {}, membership bits)", m.factor, m.tile(block));
    case MappingKind::kPacked: return fmt::format("Coarsened packed x{} (gathers {} active blocks, T = {})", m.factor,
                                                  m.factor, m.tile(block));
    case MappingKind::kRefine: return fmt::format("Refined /{} (T = {})", m.factor, m.tile(block));
  }
  return "?";
}

/// An example plan id running on catalog entry `e`: the Direct plan with B = T (B_Q = T_Q, B_KV = T_KV), one query
/// tile per CTA, ascending, no split-KV, on sm90a when the entry runs there (else its first architecture); "-" when
/// no plan can name the entry (its stages are outside a plan's 1..4).
std::string example_plan_id(const CatalogEntry& e) {
  Plan p;
  const std::vector<Arch> archs = entry_architectures(e);
  p.arch = archs.empty() ? Arch::kSm90a : archs.front();
  for (Arch a : archs)
    if (a == Arch::kSm90a) p.arch = a;
  p.family = e.family;
  p.dtype = e.dtype;
  p.head_dim = e.head_dim;
  p.block_q = e.tile_q;
  p.block_kv = e.tile_kv;
  p.org.stages = e.stages;
  p.warps = e.warps;
  try {
    return plan_id(p);
  } catch (const Error&) {
    return "-";  // e.g. stages outside a plan's s1..s4: no plan id names this entry
  }
}

constexpr const char* kPlanIdForm =
    "<arch>.<family>.<dtype>.d<D>.q<B_Q><map>.kv<B_KV><map>.g<G>[p].t<asc|desc|run>.split<P>.s<S>.w<W>";

// The GPU tile-row layout launch preparation writes for plan `p` (docs/plans.md, "Layouts"), from the same rule the
// runtime uses (prep::row_aligned_gpu), on probe masks of growing width.
std::string tile_row_layout_text(const Plan& p) {
  auto params_for = [&](std::int64_t n_kvb) {
    const std::int64_t n_qb = p.q.kind == MappingKind::kCoarsen ? p.q.factor : 1;
    return make_prep_params(p, MaskShape{1, 1, n_qb, n_kvb}, PrepProblem{1, 1, 1, n_qb * p.block_q,
                                                                          n_kvb * p.block_kv, p.head_dim});
  };
  const prep::PrepParams pp = params_for(1);
  if (prep::tile_offsets_are_mask_offsets(pp))
    return pp.traversal == 0 ? "mu(M)'s CSR itself (zero copy)" : "mu(M)'s offsets, each row's entries reordered";
  if (!prep::prefer_row_aligned(pp)) return "compact CSR, offsets from a decoupled look-back (run-major)";
  if (!prep::row_aligned_gpu(pp)) return "compact CSR (two-pass builder)";
  const std::string aligned = "row-aligned (row t at r_kv x mu(M)'s offset of its first logical row; no look-back)";
  // Largest probe: every count of make_prep_params stays in int32 (c_q, r_kv <= 8).
  const std::int64_t top = (std::int64_t{1} << 31) / (64 * std::max<std::int64_t>(p.block_kv, 1));
  if (prep::row_aligned_gpu(params_for(top))) return aligned;
  std::int64_t lo = 1, hi = top;  // aligned at lo, not at hi: the c_q > 1 row bitmaps must fit in shared memory
  while (hi - lo > 1) {
    const std::int64_t mid = (lo + hi) / 2;
    (prep::row_aligned_gpu(params_for(mid)) ? lo : hi) = mid;
  }
  return fmt::format("{} while n_kvb <= {} (the single-pass bitmaps fit), else compact CSR (two-pass builder)", aligned,
                     lo);
}

}  // namespace


void add_inspect_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Inspect the kernel catalog or a plan id");
  require_one_subcommand(cmd);

  auto* cat = cmd->add_subcommand("catalog", "Print every catalog entry (src/kernels/catalog.def)");
  auto filter = std::make_shared<std::string>(".*");
  auto arch = std::make_shared<std::optional<std::string>>();
  cat->add_option("--filter", *filter, "Regex on the entry name (default .*)");
  cat->add_option("--arch", *arch, "Only entries that run on this architecture: family built for it and shared memory "
                                  "within its limit (sm80, sm86, sm89, sm90a, sm120)");
  cat->callback([filter, arch] {
    if (arch->has_value() && !arch_from_name(**arch))  // given, an empty value included
      throw Error(ErrorCode::kInvalidArgument, "--arch",
                  fmt::format("unknown architecture '{}' (sm80, sm86, sm89, sm90a, sm120)", **arch));
    std::regex re;
    try {
      re = std::regex(*filter);
    } catch (const std::regex_error& e) {
      throw Error(ErrorCode::kInvalidArgument, "--filter", fmt::format("'{}' is not a valid regex: {}", *filter, e.what()));
    }
    fmt::print("{:<34} {:<6} {:<5} {:>4} {:>9} {:>5} {:>6} {:>8}  {:<26} {:<7} {}\n", "name", "family", "dtype", "D",
               "T_QxT_KV", "warps", "stages", "smem(B)", "architectures", "persist",
               "example plan id (Direct, B = T)");
    int shown = 0;
    for (const CatalogEntry& e : catalog()) {
      if (!std::regex_search(std::string(e.name), re)) continue;
      const std::vector<Arch> archs = entry_architectures(e);
      if (arch->has_value()) {
        bool ok = false;
        for (Arch a : archs) ok = ok || arch_name(a) == **arch;
        if (!ok) continue;
      }
      fmt::print("{:<34} {:<6} {:<5} {:>4} {:>9} {:>5} {:>6} {:>8}  {:<26} {:<7} {}\n", e.name, family_name(e.family),
                 dtype_name(e.dtype), e.head_dim, fmt::format("{}x{}", e.tile_q, e.tile_kv), e.warps, e.stages,
                 e.smem_bytes, archs_text(archs), e.persistent_ctas ? "yes" : "no", example_plan_id(e));
      ++shown;
    }
    fmt::print("{} of {} entries\n", shown, catalog().size());
    fmt::print("architectures: the family's targets whose opt-in shared memory per CTA fits smem (99 KB on sm86, "
               "sm89, sm120; 163 KB on sm80; 227 KB on sm90a)\n'-': no plan id can name the entry (a plan's stages "
               "are 1..4)\npersist: 'yes' = runs plans with persistent CTAs (g1p) as such; 'no' = runs one CTA per "
               "work item whatever the plan\n");
    fmt::print("names above are kernels; `tessera inspect plan` takes a plan id: {}\n(docs/plans.md; the last "
               "column is one plan id per entry)\n", kPlanIdForm);
  });

  auto* plan = cmd->add_subcommand("plan", "Parse a plan id and print its parts, tiles and catalog entry");
  auto id = std::make_shared<std::string>();
  plan->add_option("plan_id", *id, "Plan id, e.g. sm90a.mma.bf16.d128.q64c2.kv64p2.g1.tasc.split2.s2.w8")->required();
  plan->callback([id] {
    Plan p;
    try {
      p = parse_plan_id(*id);
    } catch (const Error& e) {
      for (const CatalogEntry& c : catalog())
        if (c.name == *id)
          throw Error(e.code(), "plan_id", fmt::format("'{}' is a kernel (catalog entry) name, not a plan id; a plan id "
                                                       "reads {}, e.g. {}", *id, kPlanIdForm, example_plan_id(c)));
      throw;
    }
    fmt::print("plan        {}\n", plan_id(p));
    fmt::print("arch        {}\nfamily      {} (targets {}; this binary's kernels: {})\ndtype       {}\nhead_dim    {}\n",
               arch_name(p.arch), family_name(p.family), archs_text(family_architectures(p.family)),
               built_cuda_architectures(), dtype_name(p.dtype), p.head_dim);
    fmt::print("query       B_Q = {}: {}\n", p.block_q, mapping_text(p.q, p.block_q));
    fmt::print("kv          B_KV = {}: {}\n", p.block_kv, mapping_text(p.kv, p.block_kv));
    fmt::print("tile        {} x {}\n", p.tile_q(), p.tile_kv());
    fmt::print("grouping    {} query tile(s) per CTA{}\n", p.org.group, p.org.persistent ? ", persistent CTAs (longest first)" : "");
    if (p.org.persistent) {
      const CatalogEntry* pe = find_plan_entry(p);
      if (pe && !pe->persistent_ctas)
        fmt::print("            (this kernel runs one CTA per work item: persistence only orders the list)\n");
    }
    fmt::print("traversal   {}\nsplit-KV    {}\nstages      {}\nwarps       {}\n", traversal_name(p.org.traversal),
               p.org.split, p.org.stages, p.warps);
    fmt::print("tile rows   {}\n", tile_row_layout_text(p));
    const CatalogEntry* e = find_plan_entry(p);
    fmt::print("kernel      {} ({})\n", plan_kernel_name(p), e ? "in the catalog" : "NOT in the catalog");
    if (e && !entry_targets(*e, p.arch)) {
      if (!family_targets(e->family, p.arch))
        fmt::print("            the {} family is built for {} only: cannot launch on {}\n", family_name(e->family),
                   archs_text(family_architectures(e->family)), arch_name(p.arch));
      else
        fmt::print("            needs {} B of shared memory per CTA: cannot launch on {} (limit {} B)\n", e->smem_bytes,
                   arch_name(p.arch), max_dynamic_smem_bytes(p.arch));
      std::fflush(stdout);  // the plan above stays above the message when both go to one file
      fmt::print(stderr, "tessera inspect plan: the catalog entry cannot launch on {}\n", arch_name(p.arch));
      throw CLI::RuntimeError(1);
    }
    if (!e) {
      std::fflush(stdout);
      fmt::print(stderr, "tessera inspect plan: no catalog entry runs this plan\n");
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace tessera::tools
