#include "core/plan.hpp"

#include <fmt/core.h>

#include <charconv>
#include <vector>

#include "tessera/error.hpp"
#include "tessera/geometry.hpp"

namespace tessera {

std::string_view arch_name(Arch a) noexcept {
  switch (a) {
    case Arch::kSm80: return "sm80";
    case Arch::kSm86: return "sm86";
    case Arch::kSm89: return "sm89";
    case Arch::kSm90a: return "sm90a";
    case Arch::kSm120: return "sm120";
  }
  return "?";
}

std::optional<Arch> arch_from_name(std::string_view name) noexcept {
  for (Arch a : {Arch::kSm80, Arch::kSm86, Arch::kSm89, Arch::kSm90a, Arch::kSm120})
    if (arch_name(a) == name) return a;
  return std::nullopt;
}

std::string_view traversal_name(Traversal t) noexcept {
  switch (t) {
    case Traversal::kAscending: return "asc";
    case Traversal::kDescending: return "desc";
    case Traversal::kRunMajor: return "run";
  }
  return "?";
}

std::string_view family_name(KernelFamily f) noexcept {
  switch (f) {
    case KernelFamily::kMma: return "mma";
    case KernelFamily::kWgmma: return "wgmma";
  }
  return "?";
}

namespace {

[[noreturn]] void bad_plan(const std::string& field, const std::string& msg) {
  throw Error(ErrorCode::kInvalidArgument, "plan." + field, msg);
}

bool is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

std::string mapping_token(const DimMapping& m) {
  switch (m.kind) {
    case MappingKind::kDirect: return "d";
    case MappingKind::kCoarsen: return fmt::format("c{}", m.factor);
    case MappingKind::kPacked: return fmt::format("p{}", m.factor);
    case MappingKind::kRefine: return fmt::format("r{}", m.factor);
  }
  return "?";
}

void check_mapping(const DimMapping& m, int block, const std::string& dim) {
  if (m.kind == MappingKind::kDirect) {
    if (m.factor != 1) bad_plan(dim + ".factor", fmt::format("Direct mapping needs factor 1, got {}", m.factor));
    return;
  }
  if (m.kind == MappingKind::kRefine) {
    // Any factor that leaves a tile of a multiple of 16 tokens: 3 and 6 map 384-token STA blocks onto 128- and
    // 64-token tiles, 5 maps 80 onto 16 (every block size the validation accepts has a plan; DESIGN.md section 3).
    if (m.factor < 2 || m.factor > kMaxRefineFactor)
      bad_plan(dim + ".factor", fmt::format("Refined factor must be in [2, {}], got {}", kMaxRefineFactor, m.factor));
    if (block % m.factor != 0 || (block / m.factor) % 16 != 0)
      bad_plan(dim + ".factor", fmt::format("Refined by {} needs B % {} == 0 and B/{} a multiple of 16 (B = {})",
                                            m.factor, m.factor, m.factor, block));
    return;
  }
  if (m.factor != 2 && m.factor != 4 && m.factor != 8)
    bad_plan(dim + ".factor", fmt::format("Coarsened factor must be 2, 4 or 8, got {}", m.factor));
}

}  // namespace

void check_plan(const Plan& p) {
  if (p.head_dim != 64 && p.head_dim != 96 && p.head_dim != 128 && p.head_dim != 256)
    bad_plan("head_dim", fmt::format("head_dim must be 64, 96, 128 or 256, got {}", p.head_dim));
  if (p.dtype != DType::kBFloat16 && p.dtype != DType::kFloat16)
    bad_plan("dtype", fmt::format("dtype must be bf16 or f16, got {}", dtype_name(p.dtype)));
  for (auto [b, name] : {std::pair{p.block_q, "block_q"}, std::pair{p.block_kv, "block_kv"}}) {
    if (b < kMinBlockSize || b > kMaxBlockSize || b % 16 != 0)
      bad_plan(name, fmt::format("logical block size must be a multiple of 16 in [16, 1024], got {}", b));
  }
  if (p.q.kind == MappingKind::kPacked) bad_plan("q", "the packed (gathered) mapping exists on the KV dimension only");
  check_mapping(p.q, p.block_q, "q");
  check_mapping(p.kv, p.block_kv, "kv");
  if (p.org.group < 1 || p.org.group > 64) bad_plan("org.group", fmt::format("group must be in [1, 64], got {}", p.org.group));
  if (!is_pow2(p.org.split) || p.org.split > 64)
    bad_plan("org.split", fmt::format("split must be a power of two in [1, 64], got {}", p.org.split));
  if (p.org.stages < 1 || p.org.stages > 4)
    bad_plan("org.stages", fmt::format("stages must be in [1, 4], got {}", p.org.stages));
  if (p.warps < 1 || p.warps > 16) bad_plan("warps", fmt::format("warps must be in [1, 16], got {}", p.warps));
}

std::string plan_id(const Plan& p) {
  check_plan(p);
  return fmt::format("{}.{}.{}.d{}.q{}{}.kv{}{}.g{}{}.t{}.split{}.s{}.w{}", arch_name(p.arch), family_name(p.family),
                     dtype_name(p.dtype), p.head_dim, p.block_q, mapping_token(p.q), p.block_kv, mapping_token(p.kv),
                     p.org.group, p.org.persistent ? "p" : "", traversal_name(p.org.traversal), p.org.split,
                     p.org.stages, p.warps);
}

std::string plan_kernel_name(const Plan& p) {
  return fmt::format("{}.{}.d{}.t{}x{}.w{}.s{}", family_name(p.family), dtype_name(p.dtype), p.head_dim, p.tile_q(),
                     p.tile_kv(), p.warps, p.org.stages);
}

namespace {

struct IdParser {
  std::string_view id;
  std::vector<std::string_view> tokens;
  std::size_t index = 0;

  [[noreturn]] void fail(std::string_view expected) const {
    throw Error(ErrorCode::kInvalidArgument, "plan_id",
                fmt::format("'{}': token {} '{}': {}", id, index + 1, index < tokens.size() ? tokens[index] : "",
                            expected));
  }
  // Parses a decimal integer without sign or leading zeros from `s` (whole string). Returns false on failure.
  static bool to_int(std::string_view s, int& out) {
    if (s.empty() || s.size() > 6 || (s.size() > 1 && s[0] == '0')) return false;
    auto r = std::from_chars(s.data(), s.data() + s.size(), out);
    return r.ec == std::errc() && r.ptr == s.data() + s.size();
  }
  std::string_view take(std::string_view what) {
    if (index >= tokens.size()) {
      throw Error(ErrorCode::kInvalidArgument, "plan_id",
                  fmt::format("'{}': missing token {} ({})", id, index + 1, what));
    }
    return tokens[index];
  }
  int prefixed_int(std::string_view prefix, std::string_view what) {
    std::string_view t = take(what);
    int v = 0;
    if (t.substr(0, prefix.size()) != prefix || !to_int(t.substr(prefix.size()), v))
      fail(fmt::format("expected {} as '{}<integer>'", what, prefix));
    return v;
  }
  // q<B><map> or kv<B><map>
  void dim(std::string_view prefix, int& block, DimMapping& m, std::string_view what) {
    std::string_view t = take(what);
    if (t.substr(0, prefix.size()) != prefix) fail(fmt::format("expected {} as '{}<B><mapping>'", what, prefix));
    t.remove_prefix(prefix.size());
    std::size_t digits = 0;
    while (digits < t.size() && t[digits] >= '0' && t[digits] <= '9') ++digits;
    if (!to_int(t.substr(0, digits), block)) fail(fmt::format("expected the logical block size after '{}'", prefix));
    std::string_view map = t.substr(digits);
    if (map == "d") {
      m = {MappingKind::kDirect, 1};
      return;
    }
    if (map.size() >= 2) {
      int f = 0;
      if (to_int(map.substr(1), f)) {
        switch (map[0]) {
          case 'c': m = {MappingKind::kCoarsen, f}; return;
          case 'p': m = {MappingKind::kPacked, f}; return;
          case 'r': m = {MappingKind::kRefine, f}; return;
          default: break;
        }
      }
    }
    fail(fmt::format("unknown mapping '{}' (expected d, c<N>, p<N> or r<N>)", map));
  }
};

}  // namespace

Plan parse_plan_id(std::string_view id) {
  IdParser ps{id, {}, 0};
  std::size_t start = 0;
  for (;;) {
    std::size_t dot = id.find('.', start);
    ps.tokens.push_back(id.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  Plan p;
  // 1 arch
  {
    std::string_view t = ps.take("architecture");
    const std::optional<Arch> a = arch_from_name(t);
    if (a) p.arch = *a;
    if (!a) ps.fail("unknown architecture (expected sm80, sm86, sm89, sm90a or sm120)");
    ++ps.index;
  }
  // 2 family
  {
    std::string_view t = ps.take("kernel family");
    if (t == "mma") p.family = KernelFamily::kMma;
    else if (t == "wgmma") p.family = KernelFamily::kWgmma;
    else ps.fail("unknown kernel family (expected mma or wgmma)");
    ++ps.index;
  }
  // 3 dtype
  {
    std::string_view t = ps.take("dtype");
    if (t == "bf16") p.dtype = DType::kBFloat16;
    else if (t == "f16") p.dtype = DType::kFloat16;
    else ps.fail("unknown dtype (expected bf16 or f16)");
    ++ps.index;
  }
  p.head_dim = ps.prefixed_int("d", "head_dim");
  ++ps.index;
  ps.dim("q", p.block_q, p.q, "query mapping");
  ++ps.index;
  ps.dim("kv", p.block_kv, p.kv, "kv mapping");
  ++ps.index;
  {
    std::string_view t = ps.take("grouping");
    bool persistent = !t.empty() && t.back() == 'p';
    if (persistent) t.remove_suffix(1);
    int g = 0;
    if (t.substr(0, 1) != "g" || !IdParser::to_int(t.substr(1), g))
      ps.fail("expected grouping as 'g<G>' or 'g<G>p' (persistent)");
    p.org.group = g;
    p.org.persistent = persistent;
    ++ps.index;
  }
  {
    std::string_view t = ps.take("traversal");
    if (t == "tasc") p.org.traversal = Traversal::kAscending;
    else if (t == "tdesc") p.org.traversal = Traversal::kDescending;
    else if (t == "trun") p.org.traversal = Traversal::kRunMajor;
    else ps.fail("unknown traversal (expected tasc, tdesc or trun)");
    ++ps.index;
  }
  p.org.split = ps.prefixed_int("split", "split-KV partitions");
  ++ps.index;
  p.org.stages = ps.prefixed_int("s", "pipeline stages");
  ++ps.index;
  p.warps = ps.prefixed_int("w", "warps");
  ++ps.index;
  if (ps.index < ps.tokens.size()) ps.fail("unexpected extra token (the id ends after w<W>)");
  try {
    check_plan(p);
  } catch (const Error& e) {
    throw Error(ErrorCode::kInvalidArgument, "plan_id", fmt::format("'{}': {}: {}", id, e.argument(), e.message()));
  }
  return p;
}

}  // namespace tessera
