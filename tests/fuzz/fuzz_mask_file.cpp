// libFuzzer target: the safetensors mask-file reader (corpus/mask_file.cpp, decode_mask_file). Every input either
// decodes or throws tessera::Error naming its argument; a decoded case re-encodes and decodes to the same bytes.
#include <vector>

#include "fuzz_common.hpp"
#include "tessera_corpus/mask_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::uint8_t> bytes(data, data + size);
  tessera::corpus::Case c;
  try {
    c = tessera::corpus::decode_mask_file(bytes);
  } catch (const tessera::Error& e) {
    tessera::fuzz::check_error(e);
    return 0;
  }
  // A case the reader accepts is one the writer can write, and writing is deterministic.
  std::vector<std::uint8_t> again;
  try {
    again = tessera::corpus::encode_mask_file(c);
  } catch (const tessera::Error& e) {
    tessera::fuzz::fail("decoded case does not re-encode:", e.what());
  }
  try {
    const tessera::corpus::Case d = tessera::corpus::decode_mask_file(again);
    if (tessera::corpus::encode_mask_file(d) != again) tessera::fuzz::fail("encode/decode is not a fixed point");
  } catch (const tessera::Error& e) {
    tessera::fuzz::fail("re-encoded case does not decode:", e.what());
  }
  return 0;
}
