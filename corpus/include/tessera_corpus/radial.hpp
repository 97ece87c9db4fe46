#pragma once
/// @file radial.hpp
/// Radial Attention's static "energy-decay" block mask, rule-exact re-implementation of
/// mit-han-lab/radial-attention radial_attn/attn_mask.py (gen_log_mask_shrinked, mask_corpus.md 2.5). One mask
/// for all heads, layers and steps. Raster token order, square blocks of B tokens.
///
/// Per frame pair (i, j), d = |i - j|, tpf tokens per frame, bitlen(x) = bits of x:
/// - j == 0: dense (first-frame sink);
/// - otherwise a token band |x - y| <= width over the positions x, y inside the frames, where width is tpf for
///   d = 0, tpf / 2 (Wan) or tpf (HunyuanVideo) for d = 1, else max(B, 2^bitlen(tpf) / 2^bitlen(d) * decay);
///   the frame pair is dropped unless 2^bitlen(tpf) / 2^bitlen(d) >= 128 or d % int(128 / that) == 0;
/// - each frame pair's token mask, placed at offset (i * tpf) % B, (j * tpf) % B in a buffer of ceil(tpf / B)
///   blocks per side, becomes blocks: a block is active iff more than 60 % of its non-empty columns have more
///   than 1/3 of their B rows active; blocks are OR-ed into the global mask at (i * tpf) / B, (j * tpf) / B.
/// - blocks at index >= N / B (the ragged tail, where the reference code's text region begins) are dense rows
///   and columns.
#include <cstdint>

#include "tessera_corpus/packed_mask.hpp"
#include "tessera_corpus/sparsifier.hpp"

namespace tessera::corpus {

/// Radial mask [1, ceil(frames * tpf / B)^2]. Throws tessera::Error(kInvalidArgument, ...) for non-positive
/// frames ("frames"), tpf ("tokens_per_frame") or a block not a multiple of 16 ("block").
PackedMask radial_mask(int frames, std::int64_t tpf, int block, double decay, bool wan);

/// Radial case: the static mask repeated for every head of the case (raster layout, square blocks).
void radial_model(const CaseContext& c, double decay, PackedMask& m, HeadNotes& notes);

}  // namespace tessera::corpus
