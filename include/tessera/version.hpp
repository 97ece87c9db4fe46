#pragma once
/// @file version.hpp
/// Library version and build information.

namespace tessera {

/// Semantic version of the library, e.g. "0.1.0".
const char* version() noexcept;
/// The CUDA architectures this build's kernels were compiled for, e.g. "80;86;89;90a;120".
const char* built_cuda_architectures() noexcept;
/// The git revision the library was built from ("unknown" outside a git checkout).
const char* git_revision() noexcept;

}  // namespace tessera
