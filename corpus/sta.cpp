#include "tessera_corpus/sta.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/json_number.hpp"
#include "tessera/error.hpp"

namespace tessera::corpus {

int sta_window_start(int c, int k, int g) {
  if (k < 1 || k > g) throw Error(ErrorCode::kInvalidArgument, "window", fmt::format("window {} outside [1, {}]", k, g));
  return std::clamp(c - k / 2, 0, g - k);
}

void sta_fill_head(PackedMask& m, std::int64_t head, const LatentGrid& g, const StaWindow& win) {
  if (m.n_qb != g.tokens() || m.n_kvb != g.tokens() || head < 0 || head >= m.heads)
    throw Error(ErrorCode::kInvalidArgument, "mask", "mask extents do not match the tile grid");
  for (int t = 0; t < g.t; ++t) {
    const int t0 = sta_window_start(t, win.t, g.t);
    for (int h = 0; h < g.h; ++h) {
      const int h0 = sta_window_start(h, win.h, g.h);
      for (int w = 0; w < g.w; ++w) {
        const int w0 = sta_window_start(w, win.w, g.w);
        const std::int64_t q = (std::int64_t(t) * g.h + h) * g.w + w;
        for (int kt = t0; kt < t0 + win.t; ++kt)
          for (int kh = h0; kh < h0 + win.h; ++kh) {
            const std::int64_t base = (std::int64_t(kt) * g.h + kh) * g.w;
            m.set_range(head, q, base + w0, base + w0 + win.w);
          }
      }
    }
  }
}

std::optional<std::array<int, 3>> parse_sta_key(std::string_view key, const std::array<int, 3>& extents) {
  std::array<int, 3> out{};
  std::size_t pos = 0;
  for (int i = 0; i < 3; ++i) {
    const std::size_t end = i < 2 ? key.find('_', pos) : key.size();
    if (end == std::string_view::npos) return std::nullopt;
    const std::string_view part = key.substr(pos, end - pos);
    // Digits only (no sign, no blank), canonical (no leading zero): one spelling per entry.
    if (part.empty() || part.find_first_not_of("0123456789") != std::string_view::npos ||
        (part.size() > 1 && part[0] == '0'))
      return std::nullopt;
    const auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), out[i]);
    if (ec != std::errc() || p != part.data() + part.size() || out[i] >= extents[i]) return std::nullopt;
    pos = end + 1;
  }
  return out;
}

StaTable load_sta_table(const std::string& path, int steps, int layers, int heads) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(ErrorCode::kIoError, "sta_table", fmt::format("'{}' is a directory, not the STA table", path));
  std::ifstream in(path);
  if (!in) throw Error(ErrorCode::kIoError, "sta_table", fmt::format("cannot read STA table '{}'", path));
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kFormatError, "sta_table", fmt::format("'{}' is not valid JSON: {}", path, e.what()));
  }
  if (!j.is_object()) throw Error(ErrorCode::kFormatError, "sta_table", "top level is not an object");
  StaTable tab{steps, layers, heads, {}};
  tab.windows.assign(std::size_t(steps) * layers * heads, StaWindow{0, 0, 0});
  std::size_t filled = 0;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::optional<std::array<int, 3>> key = parse_sta_key(it.key(), {steps, layers, heads});
    if (!key)
      throw Error(ErrorCode::kFormatError, "sta_table",
                  fmt::format("bad key '{}' (want \"<step>_<layer>_<head>\", decimal digits only, in [0, {}) x [0, "
                              "{}) x [0, {}))",
                              it.key(), steps, layers, heads));
    const auto [s, l, h] = *key;
    const auto& v = it.value();
    if (!v.is_array() || v.size() != 3)
      throw Error(ErrorCode::kFormatError, "sta_table", fmt::format("bad window for key '{}' (not [t, h, w])", it.key()));
    const auto extent = [&](int axis, const char* name, int tiles) {
      return static_cast<int>(
          json_integer(v[axis], "sta_table", fmt::format("window {} of '{}' (5x6x10 grid)", name, it.key()), 1, tiles));
    };
    const StaWindow w{extent(0, "t", kStaHunyuanTiles.t), extent(1, "h", kStaHunyuanTiles.h),
                      extent(2, "w", kStaHunyuanTiles.w)};
    auto& slot = tab.windows[(std::size_t(s) * layers + l) * heads + h];
    if (slot.t != 0) throw Error(ErrorCode::kFormatError, "sta_table", fmt::format("duplicate key '{}'", it.key()));
    slot = w;
    ++filled;
  }
  if (filled != tab.windows.size())
    throw Error(ErrorCode::kFormatError, "sta_table",
                fmt::format("{} of {} (step, layer, head) entries present", filled, tab.windows.size()));
  return tab;
}

std::string default_sta_table_path() {
  namespace fs = std::filesystem;
  const char* name = "sta_mask_strategy_hunyuan_768x1280x117.json";
  if (const char* env = std::getenv("TESSERA_STA_TABLE"); env && *env) return env;
  // The repository keeps a minified copy (corpus/data/README.md says where it comes from).
  for (const fs::path& p : {
#ifdef TESSERA_SOURCE_DIR
           fs::path(TESSERA_SOURCE_DIR) / "corpus/data" / name,
#endif
           fs::path("corpus/data") / name, fs::path("/work/shared/masks") / name, fs::path("shared/masks") / name})
    if (fs::exists(p)) return p.string();
  return {};
}

PackedMask refine_blocks(const PackedMask& c, int factor) {
  if (factor < 1) throw Error(ErrorCode::kInvalidArgument, "factor", fmt::format("factor {} < 1", factor));
  PackedMask f(c.heads, c.n_qb * factor, c.n_kvb * factor);
  for (std::int64_t h = 0; h < c.heads; ++h)
    for (std::int64_t q = 0; q < c.n_qb; ++q) {
      const std::int64_t fq0 = q * factor;
      for (std::int64_t k = 0; k < c.n_kvb;) {
        if (!c.get(h, q, k)) {
          ++k;
          continue;
        }
        std::int64_t k1 = k;
        while (k1 < c.n_kvb && c.get(h, q, k1)) ++k1;
        f.set_range(h, fq0, k * factor, k1 * factor);
        k = k1;
      }
      for (int r = 1; r < factor; ++r) std::copy_n(f.row(h, fq0), f.row_bytes, f.row(h, fq0 + r));
    }
  return f;
}

}  // namespace tessera::corpus
