// libFuzzer target: the plan-id parser (src/core/plan.cpp, parse_plan_id). Every string either parses to a plan
// whose canonical id parses back to the same plan, or throws tessera::Error naming "plan_id".
#include <string>
#include <string_view>

#include "core/catalog.hpp"
#include "core/plan.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view id(reinterpret_cast<const char*>(data), size);
  tessera::Plan p;
  try {
    p = tessera::parse_plan_id(id);
  } catch (const tessera::Error& e) {
    tessera::fuzz::check_error(e);
    if (e.argument() != "plan_id") tessera::fuzz::fail("parse error names another argument:", e.what());
    return 0;
  }
  try {
    tessera::check_plan(p);
    const std::string canon = tessera::plan_id(p);
    if (tessera::parse_plan_id(canon) != p) tessera::fuzz::fail("parse(plan_id(P)) != P for", canon);
    if (tessera::plan_id(tessera::parse_plan_id(canon)) != canon) tessera::fuzz::fail("id not canonical:", canon);
    (void)tessera::plan_kernel_name(p);
    (void)tessera::find_plan_entry(p);
  } catch (const tessera::Error& e) {
    tessera::fuzz::fail("a parsed plan fails its own checks:", e.what());
  }
  return 0;
}
