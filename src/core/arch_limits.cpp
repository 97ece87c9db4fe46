#include "core/arch_limits.hpp"

namespace tessera {

std::size_t max_dynamic_smem_bytes(Arch arch) noexcept {
  switch (arch) {
    case Arch::kSm80: return 163 * 1024;
    case Arch::kSm86:
    case Arch::kSm89:
    case Arch::kSm120: return 99 * 1024;
    case Arch::kSm90a: return 227 * 1024;
  }
  return 0;
}

}  // namespace tessera
