#include "tessera_corpus/render.hpp"

#include <fmt/core.h>
#include <png.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "tessera/error.hpp"

namespace tessera::corpus {

void render_mask_png(const PackedMask& m, std::int64_t head, const std::string& path, int max_px) {
  if (head < 0 || head >= m.heads)
    throw Error(ErrorCode::kInvalidArgument, "head", fmt::format("head {} outside [0, {})", head, m.heads));
  const std::int64_t longer = std::max<std::int64_t>(1, std::max(m.n_qb, m.n_kvb));
  const double scale = double(std::max(1, max_px)) / double(longer);  // pixels per block
  const std::int64_t W = std::max<std::int64_t>(1, std::int64_t(double(m.n_kvb) * std::min(scale, 8.0)));
  const std::int64_t H = std::max<std::int64_t>(1, std::int64_t(double(m.n_qb) * std::min(scale, 8.0)));
  std::vector<double> acc(std::size_t(W * H), 0.0), area(std::size_t(W * H), 0.0);
  for (std::int64_t q = 0; q < m.n_qb; ++q) {
    const std::int64_t y0 = q * H / m.n_qb, y1 = std::max(y0 + 1, (q + 1) * H / m.n_qb);
    for (std::int64_t k = 0; k < m.n_kvb; ++k) {
      const std::int64_t x0 = k * W / m.n_kvb, x1 = std::max(x0 + 1, (k + 1) * W / m.n_kvb);
      const double v = m.get(head, q, k) ? 1.0 : 0.0;
      for (std::int64_t y = y0; y < std::min(y1, H); ++y)
        for (std::int64_t x = x0; x < std::min(x1, W); ++x) {
          acc[std::size_t(y * W + x)] += v;
          area[std::size_t(y * W + x)] += 1.0;
        }
    }
  }
  std::vector<png_byte> img(std::size_t(W * H));
  for (std::size_t i = 0; i < img.size(); ++i)
    img[i] = png_byte(255.0 - 255.0 * (area[i] > 0 ? acc[i] / area[i] : 0.0) + 0.5);
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw Error(ErrorCode::kIoError, "path", fmt::format("cannot write '{}'", path));
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::fclose(f);
    throw Error(ErrorCode::kIoError, "path", fmt::format("libpng failed writing '{}'", path));
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, png_uint_32(W), png_uint_32(H), 8, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (std::int64_t y = 0; y < H; ++y) png_write_row(png, &img[std::size_t(y * W)]);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  const bool write_failed = std::ferror(f) != 0;
  if (std::fclose(f) != 0 || write_failed)  // buffered data reaches the file here (e.g. ENOSPC on a full disk)
    throw Error(ErrorCode::kIoError, "path", fmt::format("write to '{}' failed", path));
}

}  // namespace tessera::corpus
