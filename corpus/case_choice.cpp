#include "tessera_corpus/case_choice.hpp"

#include <algorithm>
#include <map>
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
  std::map<std::pair<std::string, int>, std::vector<int>> groups;
  const int n = case_count(family, opt);
  for (int i = 0; i < n; ++i) {
    const CaseOrigin o = case_origin(family, i, opt);
    if (o.split == split) groups[{o.source_id, o.chunk}].push_back(i);
  }
  std::size_t longest = 0;
  for (auto& [key, v] : groups) {
    std::sort(v.begin(), v.end(), [&](int x, int y) { return mix64(std::uint64_t(x)) < mix64(std::uint64_t(y)); });
    longest = std::max(longest, v.size());
  }
  // Sources alternate before chunks: order the groups by (chunk, source).
  std::vector<std::pair<std::pair<int, std::string>, const std::vector<int>*>> order;
  for (const auto& [key, v] : groups) order.push_back({{key.second, key.first}, &v});
  std::sort(order.begin(), order.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<int> out;
  for (std::size_t r = 0; r < longest && int(out.size()) < count; ++r)
    for (const auto& [key, v] : order)
      if (r < v->size() && int(out.size()) < count) out.push_back((*v)[r]);
  return out;
}

}  // namespace tessera::corpus
