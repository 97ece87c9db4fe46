#pragma once
/// @file mask_file.hpp
/// Mask files: safetensors with one tensor "mask" (dtype U8, shape [1, H, n_qb, ceil(n_kvb / 8)], the bit-packed
/// mask of packed_mask.hpp: numpy.packbits(dense, axis=-1) order) and string metadata in "__metadata__":
/// format ("tessera-mask-v1"), bit_order, family, source_id, model, sparsifier, kind, token_order, split,
/// n_q, n_kv, tokens_real, block_q, block_kv, n_qb, n_kvb, heads, head_ids, step, layer, chunk, index, seed,
/// notes (JSON list of per-head notes). Layout: 8-byte little-endian header length, JSON header padded with
/// spaces to a multiple of 8, raw bytes. Readable with `safetensors.numpy.load_file` + `numpy.unpackbits`.
#include <cstdint>
#include <string>
#include <vector>

#include "tessera_corpus/family.hpp"

namespace tessera::corpus {

/// Serialises a case to safetensors bytes. Throws tessera::Error(kInvalidArgument, "case") if the metadata
/// extents disagree with the mask.
std::vector<std::uint8_t> encode_mask_file(const Case& c);
/// Parses safetensors bytes. Throws tessera::Error(kFormatError, "mask file") naming what is malformed (non-zero
/// padding bits past n_kvb in a row included).
Case decode_mask_file(const std::vector<std::uint8_t>& bytes);

/// Writes / reads a file. Every error names the file path as its argument (read: "path" for an empty path): kIoError
/// when the file cannot be written / read (a directory included), kFormatError (from decode_mask_file) when it is
/// malformed.
void write_mask_file(const std::string& path, const Case& c);
Case read_mask_file(const std::string& path);

}  // namespace tessera::corpus
