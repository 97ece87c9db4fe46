#pragma once
// Per-architecture hardware limits that decide whether a catalog entry can launch on a target at all.
#include <cstddef>

#include "core/plan.hpp"

namespace tessera {

/// Largest dynamic shared memory, in bytes, that one CTA may opt into on `arch` (what
/// cudaDevAttrMaxSharedMemoryPerBlockOptin reports; CUDA C++ Programming Guide, compute capabilities table):
/// sm80 166912 (163 KB), sm86 / sm89 / sm120 101376 (99 KB), sm90a 232448 (227 KB). A kernel that asks for more
/// cannot launch there.
std::size_t max_dynamic_smem_bytes(Arch arch) noexcept;

}  // namespace tessera
