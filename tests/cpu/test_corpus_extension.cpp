// The full corpus's appended chunks (8-23 of every model/rule source) left the original corpus unchanged: its case
// indices, their bytes and the cases `tessera profile` / `tessera run` choose (corpus::spread_cases).
//
// Regression anchors: the hashes below were computed with the corpus of main at fcc19c5 (8 chunks per source,
// before chunks were appended), seed 0, and must never change.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tessera_corpus/case_choice.hpp"
#include "tessera_corpus/family.hpp"
#include "tessera_corpus/mask_file.hpp"
#include "tessera_corpus/rng.hpp"

using namespace tessera::corpus;

namespace {

std::uint64_t hash_ints(const std::vector<int>& v) {
  std::uint64_t h = 0;
  for (const int x : v) h = hash_combine(h, std::uint64_t(x));
  return h;
}

std::uint64_t hash_bytes(const std::vector<std::uint8_t>& v) {
  std::uint64_t h = 0;
  for (const std::uint8_t x : v) h = hash_combine(h, x);
  return h;
}

struct ChoiceAnchor {
  const char* family;
  const char* split;
  int count;            // the split's cases in the original corpus
  std::uint64_t hash;   // hash_ints(spread_cases(family, split, count)) on the original corpus
};

// spread_cases(family, split, every original case of the split), full corpus, seed 0, at fcc19c5.
constexpr ChoiceAnchor kChoices[] = {
    {"Q16K16", "profiling", 112, 0x4ebc6c597cc5c1b7ull},    {"Q16K16", "evaluation", 112, 0x03e94fc3dc04ad02ull},
    {"Q32K16", "profiling", 112, 0x3a93cce3c33936a8ull},    {"Q32K16", "evaluation", 112, 0xf2d9cfd25f120debull},
    {"Q32K32", "profiling", 112, 0x3a93cce3c33936a8ull},    {"Q32K32", "evaluation", 112, 0xf2d9cfd25f120debull},
    {"Q64K32", "profiling", 112, 0x3a93cce3c33936a8ull},    {"Q64K32", "evaluation", 112, 0xf2d9cfd25f120debull},
    {"Q64K64-HD", "profiling", 112, 0x3a93cce3c33936a8ull}, {"Q64K64-HD", "evaluation", 112, 0xf2d9cfd25f120debull},
    {"Q64K64", "profiling", 168, 0xb273c1f1b8f1736dull},    {"Q64K64", "evaluation", 168, 0xd7b44b5dd36b568bull},
    {"Q64K64-DD", "profiling", 112, 0x4ebc6c597cc5c1b7ull}, {"Q64K64-DD", "evaluation", 112, 0x03e94fc3dc04ad02ull},
    {"Q128K64", "profiling", 112, 0x4ebc6c597cc5c1b7ull},   {"Q128K64", "evaluation", 112, 0x03e94fc3dc04ad02ull},
    {"Q128K128", "profiling", 112, 0x3a93cce3c33936a8ull},  {"Q128K128", "evaluation", 112, 0xf2d9cfd25f120debull},
    {"STA-real", "profiling", 216, 0x43c5a15e45dd8a67ull},  {"STA-real", "evaluation", 181, 0xc44d3383149aa891ull},
};

struct CaseAnchor {
  const char* family;
  int index;
  std::uint64_t hash;  // hash_bytes(encode_mask_file(make_case(family, index))) at fcc19c5
};

// Full corpus, seed 0: first and last case of a source, of a chunk, of the original family, in 3 families.
constexpr CaseAnchor kCases[] = {
    {"Q16K16", 0, 0xe0220e337722c593ull},   {"Q16K16", 13, 0x6abd7b52d3cac99aull},
    {"Q16K16", 111, 0x2925dc88203beefdull}, {"Q16K16", 112, 0x8adc01bdeb637a37ull},
    {"Q16K16", 223, 0x1cd88e6282a1111eull}, {"Q64K64", 200, 0x24ea1243f78cb334ull},
    {"Q64K64", 335, 0xea028967a799890aull}, {"Q128K128", 150, 0xed4d79731fb3fd14ull},
};

struct SmallAnchor {
  const char* family;
  int count;                  // case_count
  std::uint64_t choice_hash;  // hash_ints(spread_cases(family, "profiling", all))
  std::uint64_t last_hash;    // hash_bytes of the family's last case
};

// The --small corpus (seed 0) at fcc19c5: it has no appended chunks and is unchanged.
constexpr SmallAnchor kSmall[] = {
    {"Q16K16", 16, 0x58c4153b3a3b6531ull, 0xa7af48244863bc5aull},
    {"Q32K16", 16, 0x7a95a143e958c199ull, 0xc390e6c3015ceaa2ull},
    {"Q32K32", 16, 0x7a95a143e958c199ull, 0x3e96b78e2db83bddull},
    {"Q64K32", 16, 0x7a95a143e958c199ull, 0x401ef41c85a811adull},
    {"Q64K64-HD", 16, 0x7a95a143e958c199ull, 0xea90a0e328500218ull},
    {"Q64K64", 24, 0x5ea4abbc818d6676ull, 0x2e1da12eeb1a2c46ull},
    {"Q64K64-DD", 16, 0x58c4153b3a3b6531ull, 0x4a22d31b2034b106ull},
    {"Q128K64", 16, 0x58c4153b3a3b6531ull, 0xf9c2679068db1bb9ull},
    {"Q128K128", 16, 0x7a95a143e958c199ull, 0xaf0dea6dee8109aeull},
};

}  // namespace

TEST(CorpusExtension, OriginalChoicesArePrefixOfTheNewOnes) {
  const CorpusOptions opt;
  for (const ChoiceAnchor& a : kChoices) {
    const std::vector<int> all = spread_cases(a.family, a.split, 1 << 20, opt);
    ASSERT_GE(static_cast<int>(all.size()), a.count) << a.family << " " << a.split;
    const std::vector<int> first(all.begin(), all.begin() + a.count);
    EXPECT_EQ(hash_ints(first), a.hash) << a.family << " " << a.split;
    EXPECT_EQ(spread_cases(a.family, a.split, a.count, opt), first) << a.family << " " << a.split;
    // Every original case of the split comes first; the appended ones follow.
    for (std::size_t k = 0; k < all.size(); ++k)
      EXPECT_EQ(case_origin(a.family, all[k], opt).generation, static_cast<int>(k) < a.count ? 0 : 1)
          << a.family << " " << a.split << " choice " << k;
  }
}

TEST(CorpusExtension, OriginalCasesKeepTheirBytes) {
  const CorpusOptions opt;
  for (const CaseAnchor& a : kCases)
    EXPECT_EQ(hash_bytes(encode_mask_file(make_case(a.family, a.index, opt))), a.hash) << a.family << " " << a.index;
}

TEST(CorpusExtension, SmallCorpusUnchanged) {
  CorpusOptions opt;
  opt.small = true;
  for (const SmallAnchor& a : kSmall) {
    ASSERT_EQ(case_count(a.family, opt), a.count) << a.family;
    EXPECT_EQ(hash_ints(spread_cases(a.family, "profiling", 1 << 20, opt)), a.choice_hash) << a.family;
    EXPECT_EQ(hash_bytes(encode_mask_file(make_case(a.family, a.count - 1, opt))), a.last_hash) << a.family;
    for (int i = 0; i < a.count; ++i) EXPECT_EQ(case_origin(a.family, i, opt).generation, 0) << a.family << " " << i;
  }
}

// Layout of the full corpus: 24 chunks x 14 cases per source; indices [0, S*112) are the original chunks 0-7 in
// (source, chunk, within) order, then chunks 8-23 in the same order; 168 profiling cases per source.
TEST(CorpusExtension, AppendedChunksLayout) {
  const CorpusOptions opt;
  for (const FamilySpec& f : families()) {
    if (f.name == "STA-real") continue;
    std::vector<std::string> srcs;
    for (const SourceSpec& s : sources())
      if (s.family == f.name) srcs.push_back(s.id);
    const int S = static_cast<int>(srcs.size()), n = case_count(f.name, opt);
    ASSERT_EQ(n, S * 336) << f.name;
    std::map<std::string, int> profiling;
    std::set<std::pair<std::string, int>> chunks;
    for (int i = 0; i < n; ++i) {
      const CaseOrigin o = case_origin(f.name, i, opt);
      const bool original = i < S * 112;
      const int source = original ? i / 112 : (i - S * 112) / 224;
      const int chunk = original ? (i % 112) / 14 : 8 + ((i - S * 112) % 224) / 14;
      ASSERT_EQ(o.source_id, srcs[std::size_t(source)]) << f.name << " " << i;
      ASSERT_EQ(o.chunk, chunk) << f.name << " " << i;
      ASSERT_EQ(o.generation, original ? 0 : 1) << f.name << " " << i;
      ASSERT_EQ(o.split, chunk % 2 == 0 ? "profiling" : "evaluation") << f.name << " " << i;
      profiling[o.source_id] += o.split == "profiling";
      chunks.insert({o.source_id, o.chunk});
    }
    EXPECT_EQ(chunks.size(), std::size_t(S) * 24) << f.name;
    for (const std::string& s : srcs) EXPECT_EQ(profiling[s], 168) << f.name << " " << s;
  }
  CorpusOptions sta;
  EXPECT_EQ(case_count("STA-real", sta), 405);  // 397 original + 8 appended 64x64 cases
  sta.small = true;
  EXPECT_EQ(case_count("STA-real", sta), 9);
}

// STA-real's appended cases (397-404) are 64x64 re-expressions of new (step, layer) pairs, four per split.
TEST(CorpusExtension, StaRealAppendedCasesAreFine64) {
  const CorpusOptions opt;
  std::map<std::string, int> per_split;
  for (int i = 397; i < case_count("STA-real", opt); ++i) {
    const CaseOrigin o = case_origin("STA-real", i, opt);
    EXPECT_EQ(o.generation, 1) << i;
    EXPECT_EQ(o.source_id, "sta-hv768-b64") << i;
    ++per_split[o.split];
  }
  EXPECT_EQ(per_split["profiling"], 4);
  EXPECT_EQ(per_split["evaluation"], 4);
  for (int i = 0; i < 397; ++i) ASSERT_EQ(case_origin("STA-real", i, opt).generation, 0) << i;
}

// An appended chunk is a new request (its own seed): its masks are not copies of an original chunk's.
TEST(CorpusExtension, AppendedChunkIsANewRequest) {
  const CorpusOptions opt;
  const int first_appended = 2 * 112;  // Q64K64-HD has two sources: chunk 8 of the first one
  ASSERT_EQ(case_origin("Q64K64-HD", first_appended, opt).chunk, 8);
  const Case c = make_case("Q64K64-HD", first_appended, opt);
  for (const int i : {0, 14 * 6}) EXPECT_NE(c.mask, make_case("Q64K64-HD", i, opt).mask) << i;
}
