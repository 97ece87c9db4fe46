// CPU twin of the persistent work-list builder: items ordered longest first (stable).
#include <algorithm>

#include "core/launch_prep.hpp"

namespace tessera {

void order_work_list_cpu(const prep::PrepParams& p, HostTileMetadata& out) {
  std::stable_sort(out.items.begin(), out.items.end(), [](const WorkItem& a, const WorkItem& b) {
    return prep::persistent_key(a) < prep::persistent_key(b);
  });
}

}  // namespace tessera
