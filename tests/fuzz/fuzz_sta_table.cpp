// libFuzzer target: the STA window table reader (corpus/sta.cpp, load_sta_table and parse_sta_key) on a small
// table of 2 steps x 3 layers x 4 heads. Every input either loads (every window inside the 5x6x10 tile grid, and
// usable by sta_fill_head) or throws tessera::Error naming "sta_table".
#include <string>
#include <string_view>

#include "fuzz_common.hpp"
#include "tessera_corpus/sta.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tessera::corpus;
  // The key parser on its own, with the real table's extents.
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (const auto key = parse_sta_key(text.substr(0, 32), {50, 60, 24}))
    for (int i = 0; i < 3; ++i)
      if ((*key)[i] < 0 || (*key)[i] >= std::array<int, 3>{50, 60, 24}[i]) tessera::fuzz::fail("key out of range");

  const std::string& path = tessera::fuzz::scratch_path(".sta.json");
  tessera::fuzz::write_scratch(path, data, size);
  StaTable tab;
  try {
    tab = load_sta_table(path, 2, 3, 4);
  } catch (const tessera::Error& e) {
    tessera::fuzz::check_error(e);
    if (e.argument() != "sta_table") tessera::fuzz::fail("error names another argument:", e.what());
    return 0;
  }
  if (tab.windows.size() != 24) tessera::fuzz::fail("wrong window count");
  PackedMask m(1, kStaHunyuanTiles.tokens(), kStaHunyuanTiles.tokens());
  for (const StaWindow& w : tab.windows) {
    if (w.t < 1 || w.t > kStaHunyuanTiles.t || w.h < 1 || w.h > kStaHunyuanTiles.h || w.w < 1 ||
        w.w > kStaHunyuanTiles.w)
      tessera::fuzz::fail("window outside the tile grid");
  }
  try {
    sta_fill_head(m, 0, kStaHunyuanTiles, tab.at(1, 2, 3));
  } catch (const tessera::Error& e) {
    tessera::fuzz::fail("a loaded window does not fill a head:", e.what());
  }
  return 0;
}
