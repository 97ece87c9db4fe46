#pragma once
/// @file geometry.hpp
/// Token geometry of the target video models (mask_corpus.md section 1) and the block layouts that sparsifiers
/// lay over it: raster token order (frame-major, row-major inside a frame) or 3-D tile order (tiles contiguous,
/// enumerated t-tile, h-tile, w-tile; slots inside a tile row-major). Tiled orders zero-pad the latent grid to
/// tile multiples (as STA, SSTA and VSA do), so the sequence length is the padded one; raster orders keep the
/// real length and the last logical block may be ragged.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::corpus {

/// Latent token grid T x H x W after VAE and patchify.
struct LatentGrid {
  int t = 1, h = 1, w = 1;
  std::int64_t tokens() const noexcept { return std::int64_t(t) * h * w; }
  bool operator==(const LatentGrid&) const = default;
};

/// One model at one resolution (mask_corpus.md section 1 table).
struct ModelGeometry {
  std::string name;        ///< stable id, e.g. "wan2.1-14b-720p"
  LatentGrid grid;         ///< latent tokens
  int layers = 0;          ///< attention layers
  int heads = 0;           ///< query heads per layer
  int steps = 50;          ///< default denoising steps
  int text_tokens = 0;     ///< text tokens inside self-attention (HunyuanVideo), 0 for Wan
  std::string text_note;   ///< where text lives
};

/// All model geometries of mask_corpus.md section 1 that the corpus uses.
const std::vector<ModelGeometry>& model_geometries();

/// Looks a model up by name. Throws tessera::Error(kInvalidArgument, "model") for an unknown name.
const ModelGeometry& model_geometry(std::string_view name);

/// Token order of a sparsifier: raster, or 3-D tiles of (tile_t, tile_h, tile_w) tokens.
struct TokenOrder {
  bool tiled = false;
  int tile_t = 1, tile_h = 1, tile_w = 1;
  std::int64_t tile_volume() const noexcept { return std::int64_t(tile_t) * tile_h * tile_w; }
  /// "raster" or "tiled(6,8,8)".
  std::string name() const;
  static TokenOrder raster() { return {}; }
  static TokenOrder tiles(int t, int h, int w) { return {true, t, h, w}; }
};

/// Number of tiles per axis (ceil division; edge tiles are padded).
LatentGrid tile_grid(const LatentGrid& grid, const TokenOrder& order);

/// Sequence length of a token order over a grid: grid.tokens() for raster, tiles * tile volume for tiled orders.
std::int64_t sequence_length(const LatentGrid& grid, const TokenOrder& order);

/// Logical blocks of `block` consecutive tokens in a token order. Block b covers sequence positions
/// [b*block, min((b+1)*block, N)). Centres are means of the covered slots' latent coordinates (padding slots
/// included, at their would-be coordinates); real_tokens counts covered slots inside the grid.
struct BlockLayout {
  LatentGrid grid;
  TokenOrder order;
  int block = 64;
  std::int64_t seq_len = 0;   ///< N (padded for tiled orders)
  std::int64_t n_blocks = 0;  ///< ceil(N / block)
  std::vector<float> ct, ch, cw;            ///< block centres in latent coordinates, [n_blocks] each
  std::vector<std::int32_t> first_frame;    ///< latent frame of the block's first slot, [n_blocks]
  std::vector<std::int32_t> real_tokens;    ///< tokens inside the grid, [n_blocks]
};

/// Builds the layout. Throws tessera::Error(kInvalidArgument, "block") unless block is a multiple of 16 in [16, 1024],
/// and (kInvalidArgument, "order") for a tiled order whose tile volume is neither a multiple nor a divisor of block.
BlockLayout make_block_layout(const LatentGrid& grid, const TokenOrder& order, int block);

}  // namespace tessera::corpus
