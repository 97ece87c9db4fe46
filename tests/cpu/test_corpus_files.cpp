// Mask files (safetensors round trip), determinism, density bands of the families, BlockMask view.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "tessera/error.hpp"
#include "tessera_corpus/case_stats.hpp"
#include "tessera_corpus/family.hpp"
#include "tessera_corpus/mask_file.hpp"
#include "temp_path.hpp"

using namespace tessera::corpus;

TEST(CorpusFiles, PackedBitOrderIsNumpyPackbits) {
  PackedMask m(1, 1, 10);
  m.set(0, 0, 0);
  m.set(0, 0, 9);
  EXPECT_EQ(m.bits[0], 0x80);
  EXPECT_EQ(m.bits[1], 0x40);
  m.set_range(0, 0, 2, 9);
  EXPECT_EQ(m.bits[0], 0xBF);  // blocks 0, 2..7
  EXPECT_EQ(m.bits[1], 0xC0);  // blocks 8, 9
  const auto d = unpack(m);
  EXPECT_EQ(pack(d.data(), 1, 1, 10), m);
}

TEST(CorpusFiles, RoundTripAndBlockMaskView) {
  CorpusOptions opt;
  opt.small = true;
  opt.seed = 7;
  const Case c = make_case("Q64K64-HD", 1, opt);
  const auto bytes = encode_mask_file(c);
  const Case d = decode_mask_file(bytes);
  EXPECT_EQ(d.mask, c.mask);
  EXPECT_EQ(d.meta.source_id, c.meta.source_id);
  EXPECT_EQ(d.meta.notes, c.meta.notes);
  EXPECT_EQ(d.meta.seed, 7u);
  EXPECT_EQ(d.meta.n_q, c.meta.n_q);
  EXPECT_EQ(encode_mask_file(d), bytes);
  const auto path = tessera::testing::unique_temp_path("tessera_corpus_rt", ".safetensors").string();
  write_mask_file(path, c);
  EXPECT_EQ(read_mask_file(path).mask, c.mask);
  std::filesystem::remove(path);
  const OwnedBlockMask owned(c.mask);
  ASSERT_EQ(owned.mask().n_qb, c.mask.n_qb);
  ASSERT_EQ(owned.mask().heads, c.mask.heads);
  const auto* p = static_cast<const std::uint8_t*>(owned.mask().dense.data);
  for (std::int64_t k = 0; k < c.mask.n_kvb; ++k) ASSERT_EQ(p[std::size_t(c.mask.n_kvb + k)], c.mask.get(0, 1, k));
  // Corrupt files are rejected with a precise error.
  auto bad = bytes;
  bad[0] = 0xFF;
  bad[7] = 0x7F;
  EXPECT_THROW(decode_mask_file(bad), tessera::Error);
  EXPECT_THROW(decode_mask_file(std::vector<std::uint8_t>(bytes.begin(), bytes.end() - 1)), tessera::Error);
  EXPECT_THROW(read_mask_file("/nonexistent/x.safetensors"), tessera::Error);
}

TEST(CorpusFiles, SameSeedSameBytes) {
  CorpusOptions a, b;
  a.small = b.small = true;
  a.seed = b.seed = 3;
  for (const char* fam : {"Q64K64", "Q32K32", "Q64K64-DD"}) {
    EXPECT_EQ(encode_mask_file(make_case(fam, 2, a)), encode_mask_file(make_case(fam, 2, b))) << fam;
  }
  b.seed = 4;
  EXPECT_NE(make_case("Q64K64", 0, a).mask, make_case("Q64K64", 0, b).mask);
  EXPECT_THROW(make_case("Q64K64", 100000, a), tessera::Error);
  EXPECT_THROW(make_case("Q99", 0, a), tessera::Error);
}

TEST(CorpusFiles, FamiliesStayInDensityBands) {
  CorpusOptions opt;
  opt.small = true;
  for (const auto& f : families()) {
    if (f.name == "STA-real") continue;  // tested against section 4.1
    CaseStats all;
    std::set<std::string> srcs;
    for (int i = 0, n = case_count(f.name, opt); i < n; ++i) {
      const Case c = make_case(f.name, i, opt);
      ASSERT_EQ(c.meta.block_q, f.block_q);
      ASSERT_EQ(c.meta.block_kv, f.block_kv);
      srcs.insert(c.meta.source_id);
      const CaseStats s = case_stats(c.mask, f.block_q, f.block_kv);
      EXPECT_EQ(s.empty_rows, 0) << c.meta.source_id;
      all.add(s);
    }
    EXPECT_GE(srcs.size(), 2u) << f.name;
    EXPECT_GE(all.density(), f.density_lo) << f.name;
    EXPECT_LE(all.density(), f.density_hi) << f.name;
  }
}

TEST(CorpusFiles, DefaultCorpusSize) {
  CorpusOptions opt;
  int total = 0;
  for (const auto& f : families()) total += case_count(f.name, opt);
  EXPECT_EQ(total, 19 * 336 + 405);  // 19 model/rule sources x 24 chunks x 14 cases, STA-real
}

// Non-zero padding bits past n_kvb in a row's last byte are rejected (they would count as blocks), and every error
// of read_mask_file names the file path; a directory is a clean io error.
TEST(CorpusFiles, PaddingBitsRejectedAndErrorsNameThePath) {
  CorpusOptions opt;
  opt.small = true;
  Case c;
  bool found = false;
  for (const auto& f : families()) {
    for (int i = 0; i < std::min(3, case_count(f.name, opt)) && !found; ++i) {
      c = make_case(f.name, i, opt);
      found = c.mask.n_kvb % 8 != 0;
    }
    if (found) break;
  }
  ASSERT_TRUE(found) << "no small-corpus case with n_kvb % 8 != 0";
  auto bytes = encode_mask_file(c);
  ASSERT_NO_THROW(decode_mask_file(bytes));
  // The last byte of the file is the last byte of the last row: set its lowest bit (padding since n_kvb % 8 != 0).
  bytes.back() |= 1u;
  try {
    decode_mask_file(bytes);
    ADD_FAILURE() << "padding bit accepted";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.code(), tessera::ErrorCode::kFormatError);
    EXPECT_NE(e.message().find("padding"), std::string::npos) << e.what();
  }
  const auto dir = tessera::testing::unique_temp_path("tessera_padding_test");
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "bad.safetensors").string();
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
  try {
    read_mask_file(path);
    ADD_FAILURE() << "padding bit accepted";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.argument(), path);
    EXPECT_EQ(e.code(), tessera::ErrorCode::kFormatError);
  }
  try {
    read_mask_file(dir.string());
    ADD_FAILURE() << "a directory was read";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.argument(), dir.string());
    EXPECT_EQ(e.code(), tessera::ErrorCode::kIoError);
  }
  try {
    read_mask_file("/nonexistent/x.safetensors");
    ADD_FAILURE();
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.argument(), "/nonexistent/x.safetensors");
  }
  std::filesystem::remove_all(dir);
}

// case_origin() (used to pick profiling cases without generating masks) agrees with make_case()'s metadata: every
// case of the small corpus; in the full corpus the first, the first appended (chunks 8-23, family.hpp; STA-real: a
// middle one) and the last case of every family.
TEST(CorpusFiles, CaseOriginMatchesMakeCase) {
  for (const bool small : {true, false}) {
    CorpusOptions opt;
    opt.small = small;
    for (const auto& f : families()) {
      const int n = case_count(f.name, opt);
      std::vector<int> idx;
      if (small) {
        for (int i = 0; i < n; ++i) idx.push_back(i);
      } else {
        // Model/rule families: the first appended case instead of a middle one (n / 2 is appended too); the
        // original cases' metadata is anchored by test_corpus_extension.cpp.
        int first_appended = n / 2;
        for (int i = n - 1; i > 0 && case_origin(f.name, i, opt).generation == 1; --i) first_appended = i;
        idx = {0, first_appended, n - 1};
      }
      for (const int i : idx) {
        const CaseOrigin o = case_origin(f.name, i, opt);
        const CaseMeta m = make_case(f.name, i, opt).meta;
        EXPECT_EQ(o.source_id, m.source_id) << f.name << " " << i;
        EXPECT_EQ(o.chunk, m.chunk) << f.name << " " << i;
        EXPECT_EQ(o.split, m.split) << f.name << " " << i;
      }
    }
  }
  EXPECT_THROW(case_origin("Q16K16", -1, CorpusOptions{}), tessera::Error);
}
