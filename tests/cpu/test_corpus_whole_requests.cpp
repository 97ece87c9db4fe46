// Whole requests (family.hpp make_whole_request): every head of the model's layer for a case's (source, chunk,
// step, layer), deterministic, and the stored case's heads bit-identical to the same heads of the whole request.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "tessera/error.hpp"
#include "tessera_corpus/corpus_writer.hpp"
#include "tessera_corpus/family.hpp"
#include "tessera_corpus/mask_file.hpp"
#include "temp_path.hpp"

using namespace tessera::corpus;
namespace fs = std::filesystem;

namespace {

std::vector<int> ids_of(const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) v.push_back(std::stoi(x));
  return v;
}

void expect_contains_case(const Case& whole, const Case& c, const std::string& what) {
  const auto& w = whole.meta;
  const auto& m = c.meta;
  // Every field but the heads is the case's.
  EXPECT_TRUE(std::tie(w.family, w.source_id, w.model, w.split, w.step, w.layer, w.chunk, w.index, w.seed, w.n_q,
                       w.n_kv, w.tokens_real) == std::tie(m.family, m.source_id, m.model, m.split, m.step, m.layer,
                                                          m.chunk, m.index, m.seed, m.n_q, m.n_kv, m.tokens_real))
      << what;
  EXPECT_EQ(whole.mask.n_qb, c.mask.n_qb) << what;
  EXPECT_EQ(whole.mask.n_kvb, c.mask.n_kvb) << what;
  const std::vector<int> wid = ids_of(w.head_ids), cid = ids_of(m.head_ids);
  ASSERT_EQ(int(wid.size()), whole.mask.heads) << what;
  for (int h = 0; h < int(wid.size()); ++h) ASSERT_EQ(wid[std::size_t(h)], h) << what;  // 0..H-1 in order
  const auto wn = nlohmann::json::parse(w.notes), cn = nlohmann::json::parse(m.notes);
  ASSERT_EQ(int(wn.size()), whole.mask.heads) << what;
  const std::size_t head_bytes = std::size_t(c.mask.n_qb * c.mask.row_bytes);
  for (std::size_t h = 0; h < cid.size(); ++h) {
    const int j = cid[h];
    ASSERT_LT(j, whole.mask.heads) << what;
    EXPECT_TRUE(std::equal(c.mask.bits.begin() + std::ptrdiff_t(h * head_bytes),
                           c.mask.bits.begin() + std::ptrdiff_t((h + 1) * head_bytes),
                           whole.mask.bits.begin() + std::ptrdiff_t(std::size_t(j) * head_bytes)))
        << what << ": stored head " << h << " (head id " << j << ") differs from the whole request's head " << j;
    EXPECT_EQ(cn[h], wn[std::size_t(j)]) << what;
  }
}

}  // namespace

// One case of every source (the small corpus has the full geometries, fewer chunks): the whole request holds the
// model's heads and contains the stored case bit for bit.
TEST(WholeRequests, HoldEveryHeadAndContainTheStoredCase) {
  CorpusOptions opt;
  opt.small = true;
  opt.seed = 7;
  for (const auto& fam : families()) {
    if (fam.name == "STA-real") continue;
    const int n = case_count(fam.name, opt), per_source = 8;  // --small: 2 chunks x 2 steps x 2 layers
    for (int s = 0; s * per_source < n; ++s) {
      const int index = s * per_source + (3 + 5 * s) % per_source;  // both chunks, steps and layers over the sources
      const Case c = make_case(fam.name, index, opt);
      const Case whole = make_whole_request(fam.name, index, opt);
      const std::string what = fam.name + " case " + std::to_string(index) + " (" + c.meta.source_id + ")";
      EXPECT_EQ(whole.mask.heads, model_geometry(c.meta.model).heads) << what;
      EXPECT_EQ(whole.mask.heads, request_heads(fam.name, index, opt)) << what;
      EXPECT_EQ(whole.meta.heads, whole.mask.heads) << what;
      EXPECT_GT(whole.mask.heads, c.mask.heads) << what;
      expect_contains_case(whole, c, what);
    }
  }
}

TEST(WholeRequests, Deterministic) {
  CorpusOptions opt;
  opt.small = true;
  const Case a = make_whole_request("Q64K64-HD", 5, opt), b = make_whole_request("Q64K64-HD", 5, opt);
  EXPECT_TRUE(a.mask == b.mask);
  EXPECT_EQ(a.meta.notes, b.meta.notes);
  opt.seed = 1;
  EXPECT_FALSE(make_whole_request("Q64K64-HD", 5, opt).mask == a.mask);  // the seed matters (model source)
}

TEST(WholeRequests, StaRealCasesAreWhole) {
  CorpusOptions opt;
  opt.small = true;
  for (int i = 0; i < case_count("STA-real", opt); i += 3) {
    const Case c = make_case("STA-real", i, opt), w = make_whole_request("STA-real", i, opt);
    EXPECT_TRUE(c.mask == w.mask) << i;
    EXPECT_EQ(w.mask.heads, 24);
    EXPECT_EQ(request_heads("STA-real", i, opt), 24);
    expect_contains_case(w, c, "STA-real " + std::to_string(i));
  }
}

TEST(WholeRequests, BadIndex) {
  CorpusOptions opt;
  opt.small = true;
  try {
    (void)make_whole_request("Q16K16", case_count("Q16K16", opt), opt);
    ADD_FAILURE() << "an out-of-range index was accepted";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.argument(), "index");
  }
}

TEST(WholeRequests, WriterFilesAndManifest) {
  CorpusOptions opt;
  opt.small = true;
  opt.families = {"Q64K64-HD", "Q128K128"};
  const fs::path out = tessera::testing::unique_temp_path("whole_requests");
  const CorpusSummary s = write_whole_requests(out.string(), opt, "evaluation", 3, 2);
  EXPECT_EQ(s.cases, 6);
  EXPECT_EQ(s.evaluation, 6);
  std::ifstream mf(out / "manifest.json");
  const auto manifest = nlohmann::json::parse(mf);
  EXPECT_EQ(manifest["whole_requests"], true);
  EXPECT_EQ(manifest["requests_split"], "evaluation");
  ASSERT_EQ(manifest["cases"].size(), 6u);
  for (const auto& e : manifest["cases"]) {
    const Case f = read_mask_file((out / e["file"].get<std::string>()).string());
    const Case w = make_whole_request(e["family"], e["index"], opt);
    EXPECT_TRUE(f.mask == w.mask) << e.dump();
    EXPECT_EQ(f.meta.heads, e["heads"].get<int>());
    EXPECT_EQ(f.meta.split, "evaluation");
    EXPECT_EQ(e["case_head_ids"], make_case(e["family"], e["index"], opt).meta.head_ids);
  }
  fs::remove_all(out);
  for (const auto& [split, count, arg] : {std::tuple{"bogus", 1, "split"}, std::tuple{"evaluation", 0, "count"}}) {
    const fs::path o2 = tessera::testing::unique_temp_path("whole_requests_bad");
    try {
      (void)write_whole_requests(o2.string(), opt, split, count, 1);
      ADD_FAILURE() << split << " " << count << " accepted";
    } catch (const tessera::Error& e) {
      EXPECT_EQ(e.argument(), arg);
    }
    EXPECT_FALSE(fs::exists(o2)) << "nothing is written on a bad argument";
  }
}
