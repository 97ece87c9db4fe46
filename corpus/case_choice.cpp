#include "tessera_corpus/case_choice.hpp"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "tessera/error.hpp"
#include "tessera_corpus/family.hpp"
#include "tessera_corpus/rng.hpp"

namespace tessera::corpus {

std::vector<int> spread_cases(const std::string& family, const std::string& split, int count,
                              const CorpusOptions& opt) {
  if (split != "profiling" && split != "evaluation")
    throw Error(ErrorCode::kInvalidArgument, "split", "split must be \"profiling\" or \"evaluation\", got \"" + split + "\"");
  if (count < 0) throw Error(ErrorCode::kInvalidArgument, "count", "count must be >= 0");
  // Groups keyed (generation, chunk, source): sources alternate before chunks, and every original case comes
  // before any appended one, so the choices of the original corpus stay a prefix of the list.
  std::map<std::tuple<int, int, std::string>, std::vector<int>> groups;
  const int n = case_count(family, opt);
  for (int i = 0; i < n; ++i) {
    const CaseOrigin o = case_origin(family, i, opt);
    if (o.split == split) groups[{o.generation, o.chunk, o.source_id}].push_back(i);
  }
  std::map<int, std::size_t> longest;  // per generation
  for (auto& [key, v] : groups) {
    std::sort(v.begin(), v.end(), [&](int x, int y) { return mix64(std::uint64_t(x)) < mix64(std::uint64_t(y)); });
    longest[std::get<0>(key)] = std::max(longest[std::get<0>(key)], v.size());
  }
  // Round-robin over the groups of one generation, then the next.
  std::vector<int> out;
  for (const auto& [generation, rounds] : longest)
    for (std::size_t r = 0; r < rounds && int(out.size()) < count; ++r)
      for (const auto& [key, v] : groups)
        if (std::get<0>(key) == generation && r < v.size() && int(out.size()) < count) out.push_back(v[r]);
  return out;
}

}  // namespace tessera::corpus
