#include <cmath>

#include "tessera/request.hpp"

namespace tessera {

double AttentionRequest::effective_scale() const noexcept {
  if (scale) return *scale;
  const std::int64_t d = q.rank == 4 ? q.shape[3] : 0;
  return d > 0 ? 1.0 / std::sqrt(static_cast<double>(d)) : 1.0;
}

}  // namespace tessera
