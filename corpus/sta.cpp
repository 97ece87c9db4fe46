#include "tessera_corpus/sta.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

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
    int s = -1, l = -1, h = -1;
    char tail = 0;
    if (std::sscanf(it.key().c_str(), "%d_%d_%d%c", &s, &l, &h, &tail) != 3 || s < 0 || s >= steps || l < 0 ||
        l >= layers || h < 0 || h >= heads)
      throw Error(ErrorCode::kFormatError, "sta_table", fmt::format("bad key '{}'", it.key()));
    const auto& v = it.value();
    if (!v.is_array() || v.size() != 3 || !v[0].is_number_integer() || !v[1].is_number_integer() ||
        !v[2].is_number_integer())
      throw Error(ErrorCode::kFormatError, "sta_table", fmt::format("bad window for key '{}'", it.key()));
    StaWindow w{v[0].get<int>(), v[1].get<int>(), v[2].get<int>()};
    if (w.t < 1 || w.t > kStaHunyuanTiles.t || w.h < 1 || w.h > kStaHunyuanTiles.h || w.w < 1 || w.w > kStaHunyuanTiles.w)
      throw Error(ErrorCode::kFormatError, "sta_table", fmt::format("window out of the 5x6x10 grid at '{}'", it.key()));
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
