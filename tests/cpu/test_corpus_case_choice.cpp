// corpus::spread_cases: a few cases that still cover every source of a family, from one split only.
#include <gtest/gtest.h>

#include <set>

#include "tessera/error.hpp"
#include "tessera_corpus/case_choice.hpp"
#include "tessera_corpus/family.hpp"

using namespace tessera::corpus;

TEST(CorpusCaseChoice, CoversEverySourceOfTheSplitFirst) {
  const CorpusOptions opt;  // the full corpus: only case_origin() is read
  for (const auto& f : families()) {
    for (const std::string split : {"profiling", "evaluation"}) {
      std::set<std::string> sources;
      for (int i = 0; i < case_count(f.name, opt); ++i)
        if (case_origin(f.name, i, opt).split == split) sources.insert(case_origin(f.name, i, opt).source_id);
      const std::vector<int> few = spread_cases(f.name, split, static_cast<int>(sources.size()), opt);
      std::set<std::string> seen;
      for (const int i : few) {
        EXPECT_EQ(case_origin(f.name, i, opt).split, split) << f.name << " " << i;
        seen.insert(case_origin(f.name, i, opt).source_id);
      }
      // STA-real's groups are (source, layer): its first round may repeat a source, so only "several" is asked.
      if (f.name != "STA-real") EXPECT_EQ(seen, sources) << f.name << " " << split;
      else EXPECT_GE(seen.size(), 2u);
      // Deterministic, distinct, and asking for more than there are returns all of them once.
      EXPECT_EQ(few, spread_cases(f.name, split, static_cast<int>(sources.size()), opt));
      const std::vector<int> all = spread_cases(f.name, split, 1 << 20, opt);
      EXPECT_EQ(std::set<int>(all.begin(), all.end()).size(), all.size());
      int in_split = 0;
      for (int i = 0; i < case_count(f.name, opt); ++i) in_split += case_origin(f.name, i, opt).split == split;
      EXPECT_EQ(static_cast<int>(all.size()), in_split);
    }
  }
}

TEST(CorpusCaseChoice, BadArgumentsAreNamed) {
  const CorpusOptions opt;
  try {
    spread_cases("Q64K64", "train", 1, opt);
    ADD_FAILURE();
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.argument(), "split");
  }
  try {
    spread_cases("Q64K64", "evaluation", -1, opt);
    ADD_FAILURE();
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.argument(), "count");
  }
  EXPECT_THROW(spread_cases("Q99K99", "evaluation", 1, opt), tessera::Error);
  EXPECT_TRUE(spread_cases("Q64K64", "evaluation", 0, opt).empty());
}
