#include "tessera_corpus/geometry.hpp"

#include <fmt/core.h>

#include "tessera/error.hpp"
#include "tessera/geometry.hpp"

namespace tessera::corpus {

const std::vector<ModelGeometry>& model_geometries() {
  static const std::vector<ModelGeometry> models = {
      {"wan2.1-14b-720p", {21, 45, 80}, 40, 40, 50, 0, "cross-attention (umT5)"},
      {"wan2.1-14b-480p", {21, 30, 52}, 40, 40, 50, 0, "cross-attention (umT5)"},
      {"wan2.2-a14b-720p", {21, 45, 80}, 40, 40, 40, 0, "cross-attention; two experts"},
      {"wan2.2-a14b-480p", {21, 30, 52}, 40, 40, 40, 0, "cross-attention; two experts"},
      {"wan2.2-ti2v-5b-704p", {31, 22, 40}, 30, 24, 50, 0, "cross-attention"},
      {"hunyuanvideo-720p", {33, 45, 80}, 60, 24, 50, 256, "<=256 text tokens appended after video"},
      {"hunyuanvideo-768p", {30, 48, 80}, 60, 24, 50, 256, "<=256 text tokens appended after video"},
      {"hunyuanvideo1.5-720p", {31, 45, 80}, 54, 16, 50, 1985, "<=1985 encoder tokens appended after video"},
      {"hunyuanvideo1.5-480p", {31, 30, 53}, 54, 16, 50, 1985, "<=1985 encoder tokens appended after video"},
  };
  return models;
}

const ModelGeometry& model_geometry(std::string_view name) {
  for (const auto& m : model_geometries())
    if (m.name == name) return m;
  throw Error(ErrorCode::kInvalidArgument, "model", fmt::format("unknown model '{}'", name));
}

std::string TokenOrder::name() const {
  return tiled ? fmt::format("tiled({},{},{})", tile_t, tile_h, tile_w) : std::string("raster");
}

LatentGrid tile_grid(const LatentGrid& g, const TokenOrder& o) {
  if (!o.tiled) return g;
  return {(g.t + o.tile_t - 1) / o.tile_t, (g.h + o.tile_h - 1) / o.tile_h, (g.w + o.tile_w - 1) / o.tile_w};
}

std::int64_t sequence_length(const LatentGrid& g, const TokenOrder& o) {
  if (!o.tiled) return g.tokens();
  return tile_grid(g, o).tokens() * o.tile_volume();
}

BlockLayout make_block_layout(const LatentGrid& grid, const TokenOrder& order, int block) {
  if (block < kMinBlockSize || block > kMaxBlockSize || block % 16 != 0)
    throw Error(ErrorCode::kInvalidArgument, "block", fmt::format("block size {} is not a multiple of 16 in [16, 1024]", block));
  const std::int64_t vol = order.tile_volume();
  if (order.tiled && vol % block != 0 && block % vol != 0)
    throw Error(ErrorCode::kInvalidArgument, "order",
                fmt::format("tile volume {} is neither a multiple nor a divisor of block {}", vol, block));
  BlockLayout L;
  L.grid = grid;
  L.order = order;
  L.block = block;
  L.seq_len = sequence_length(grid, order);
  L.n_blocks = num_blocks(L.seq_len, block);
  std::vector<double> st(L.n_blocks, 0), sh(L.n_blocks, 0), sw(L.n_blocks, 0);
  std::vector<std::int64_t> cnt(L.n_blocks, 0);
  L.first_frame.assign(L.n_blocks, -1);
  L.real_tokens.assign(L.n_blocks, 0);
  auto visit = [&](std::int64_t pos, int t, int h, int w) {
    const std::int64_t b = pos / block;
    st[b] += t;
    sh[b] += h;
    sw[b] += w;
    ++cnt[b];
    if (L.first_frame[b] < 0) L.first_frame[b] = t;
    if (t < grid.t && h < grid.h && w < grid.w) ++L.real_tokens[b];
  };
  std::int64_t pos = 0;
  if (!order.tiled) {
    for (int t = 0; t < grid.t; ++t)
      for (int h = 0; h < grid.h; ++h)
        for (int w = 0; w < grid.w; ++w) visit(pos++, t, h, w);
  } else {
    const LatentGrid tg = tile_grid(grid, order);
    for (int a = 0; a < tg.t; ++a)
      for (int b = 0; b < tg.h; ++b)
        for (int c = 0; c < tg.w; ++c)
          for (int t = 0; t < order.tile_t; ++t)
            for (int h = 0; h < order.tile_h; ++h)
              for (int w = 0; w < order.tile_w; ++w)
                visit(pos++, a * order.tile_t + t, b * order.tile_h + h, c * order.tile_w + w);
  }
  L.ct.resize(L.n_blocks);
  L.ch.resize(L.n_blocks);
  L.cw.resize(L.n_blocks);
  for (std::int64_t b = 0; b < L.n_blocks; ++b) {
    L.ct[b] = float(st[b] / double(cnt[b]));
    L.ch[b] = float(sh[b] / double(cnt[b]));
    L.cw[b] = float(sw[b] / double(cnt[b]));
  }
  return L;
}

}  // namespace tessera::corpus
