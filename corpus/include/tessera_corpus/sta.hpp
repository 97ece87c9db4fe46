#pragma once
/// @file sta.hpp
/// Sliding Tile Attention (STA, FastVideo; mask_corpus.md section 2.1): rule-exact block masks in tile
/// coordinates, the real per-(step, layer, head) window table for HunyuanVideo 768x1280x117, and the exact
/// re-expression of a 384-token tile mask at finer blocks.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera_corpus/geometry.hpp"
#include "tessera_corpus/packed_mask.hpp"

namespace tessera::corpus {

/// Window in tiles (t, h, w).
struct StaWindow {
  int t = 1, h = 1, w = 1;
  bool operator==(const StaWindow&) const = default;
};

/// First tile of the window of query tile c along one axis of g tiles, window k tiles:
/// clamp(c - k/2, 0, g - k) (h200_baselines.md, last line). The window covers [start, start + k): it shifts at
/// the grid edges instead of shrinking. Throws tessera::Error(kInvalidArgument, "window") unless 1 <= k <= g.
int sta_window_start(int c, int k, int g);

/// Fills head `head` of `m` (n_qb = n_kvb = tiles.tokens(), tiles enumerated t, h, w) with the STA mask of
/// `win`: every row gets exactly win.t * win.h * win.w active tiles. Throws for a bad window or mask extent.
void sta_fill_head(PackedMask& m, std::int64_t head, const LatentGrid& tiles, const StaWindow& win);

/// The real STA table (FastVideo assets/mask_strategy_hunyuan.json): window[step][layer][head].
struct StaTable {
  int steps = 0, layers = 0, heads = 0;
  std::vector<StaWindow> windows;  ///< [steps * layers * heads]
  const StaWindow& at(int step, int layer, int head) const { return windows[(std::size_t(step) * layers + layer) * heads + head]; }
};

/// Parses a table key "<step>_<layer>_<head>" strictly: three canonical decimal integers (digits only: no sign,
/// blank or leading zero; the whole key consumed), each below its extent in `extents` ({steps, layers, heads}).
/// Returns nullopt otherwise (e.g. "+0_0_0", "0_ 0_0", "0_0_4294967296", "0_0_0x").
std::optional<std::array<int, 3>> parse_sta_key(std::string_view key, const std::array<int, 3>& extents);

/// Reads the table JSON ({"step_layer_head": [t, h, w], ...}) with nlohmann-json. Every key (parse_sta_key) in
/// [0,steps) x [0,layers) x [0,heads) must be present exactly once; t, h, w must be JSON integers within the 5x6x10
/// tile grid (a float, a boolean or 4294967297 is rejected, never converted). Throws tessera::Error(kIoError,
/// "sta_table") if the file cannot be read, (kFormatError, "sta_table") for a malformed key/value or a missing entry.
StaTable load_sta_table(const std::string& path, int steps = 50, int layers = 60, int heads = 24);

/// Path of the shared HunyuanVideo STA table: $TESSERA_STA_TABLE, else /work/shared/masks/..., else the
/// source tree's shared/masks/... (empty if none exists).
std::string default_sta_table_path();

/// HunyuanVideo 768p STA geometry: latent 30x48x80, tiles (6,8,8), tile grid 5x6x10 = 300 tiles.
inline constexpr LatentGrid kStaHunyuanTiles{5, 6, 10};

/// Exact re-expression at a finer block: a mask over blocks of B tokens becomes a mask over blocks of B / factor
/// tokens (same token order) where fine block (i, j) is active iff coarse block (i / factor, j / factor) is.
/// Throws tessera::Error(kInvalidArgument, "factor") for factor < 1.
PackedMask refine_blocks(const PackedMask& coarse, int factor);

}  // namespace tessera::corpus
