#pragma once
/// @file render.hpp
/// PNG rendering of a mask: one head, kv blocks left to right, query blocks top to bottom; active = dark.
/// Masks larger than max_px are box-downsampled (grey = fraction of active blocks in the pixel's area).
#include <cstdint>
#include <string>

#include "tessera_corpus/packed_mask.hpp"

namespace tessera::corpus {

/// Writes head `head` of m as an 8-bit greyscale PNG at most max_px pixels on the longer side (upsampled with
/// whole pixels per block when the mask is small). Throws tessera::Error(kInvalidArgument, "head") for a head out
/// of range and (kIoError, "path") when the file cannot be written.
void render_mask_png(const PackedMask& m, std::int64_t head, const std::string& path, int max_px = 512);

}  // namespace tessera::corpus
