// libFuzzer target: the plan-table loader (src/core/plan_table.cpp) with its strict checks, and what the runtimes
// do with a table that loads (src/core/selector.cpp: the ranking walk, the base-plan and default-plan fallbacks).
// Every input either loads or throws tessera::Error(kFormatError, "plan_table"); a loaded table round-trips through
// plan_table_to_json, and selecting a plan for each of its keys either succeeds or throws kUnsupported "request".
#include <string>

#include "core/catalog.hpp"
#include "core/features.hpp"
#include "core/plan_table.hpp"
#include "core/selector.hpp"
#include "fuzz_common.hpp"

namespace {

void select_every_key(const tessera::PlanTable& table, std::uint64_t salt) {
  tessera::SelectorCache cache;
  tessera::warm_selector_cache(table, cache);
  int n = 0;
  for (const auto& [key_str, tree] : table.trees) {
    if (++n > 8) break;
    const auto key = tessera::parse_request_key(key_str);
    if (!key) tessera::fuzz::fail("a loaded table has an unparsable key:", key_str);
    tessera::EligibilityRequest req;
    const auto arch = tessera::arch_from_name(key->arch);
    if (!arch) tessera::fuzz::fail("a loaded table has an unknown arch:", key->arch);
    req.arch = *arch;
    req.dtype = key->dtype;
    req.head_dim = key->head_dim;
    req.block_q = key->block_q;
    req.block_kv = key->block_kv;
    req.mask_format = static_cast<tessera::MaskFormat>(salt % 3);
    req.query_tiles = 64;
    tessera::FeatureVector f{};
    for (int i = 0; i < tessera::kFeatureCount; ++i) f[i] = double((salt >> (i * 5)) % 41) / 4.0;
    f[0] = 1 + double(salt % 64);
    f[1] = 1024 * double(1 + salt % 16);
    const tessera::RegimeLookup look = table.lookup(key_str, f);
    if (!look.tree || !look.ranking || look.leaf < 0 || look.leaf >= int(tree.rankings.size()))
      tessera::fuzz::fail("lookup of a present key found no leaf:", key_str);
    for (const tessera::PlanTable* t : {&table, static_cast<const tessera::PlanTable*>(nullptr)}) {
      try {
        const tessera::Selection s = tessera::select_plan(tessera::catalog(), t, req, f, &cache);
        if (tessera::plan_id(s.plan) != s.plan_id) tessera::fuzz::fail("selection id mismatch", s.plan_id);
      } catch (const tessera::Error& e) {
        tessera::fuzz::check_error(e);
        if (e.code() != tessera::ErrorCode::kUnsupported || e.argument() != "request")
          tessera::fuzz::fail("select_plan threw an unexpected error:", e.what());
      }
      try {
        const tessera::RequestSelections all = tessera::select_for_every_regime(tessera::catalog(), t, req, &cache);
        (void)all;
      } catch (const tessera::Error& e) {
        tessera::fuzz::fail("select_for_every_regime threw:", e.what());
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  std::uint64_t salt = 1469598103934665603ull;
  for (std::size_t i = 0; i < size; ++i) salt = (salt ^ data[i]) * 1099511628211ull;
  // The runtimes' path: the table of this arch and catalog, or an error that they turn into the default plans.
  try {
    (void)tessera::plan_table_for_arch(json, "sm90a", std::string(tessera::catalog_version()));
  } catch (const tessera::Error& e) {
    tessera::fuzz::check_error(e);
    if (e.code() != tessera::ErrorCode::kFormatError || e.argument() != "plan_table")
      tessera::fuzz::fail("plan_table_for_arch threw an unexpected error:", e.what());
  }
  tessera::PlanTable table;
  try {
    table = tessera::plan_table_from_json(json);
  } catch (const tessera::Error& e) {
    tessera::fuzz::check_error(e);
    if (e.code() != tessera::ErrorCode::kFormatError || e.argument() != "plan_table")
      tessera::fuzz::fail("plan_table_from_json threw an unexpected error:", e.what());
    return 0;
  }
  try {
    const std::string again = tessera::plan_table_to_json(table);
    if (!(tessera::plan_table_from_json(again) == table)) tessera::fuzz::fail("to_json/from_json round trip differs");
  } catch (const tessera::Error& e) {
    tessera::fuzz::fail("a loaded table does not round-trip:", e.what());
  }
  select_every_key(table, salt);
  return 0;
}
