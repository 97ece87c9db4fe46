#include "tessera/version.hpp"

#include "build_info.hpp"

namespace tessera {

const char* version() noexcept { return TESSERA_VERSION_STRING; }
const char* built_cuda_architectures() noexcept { return TESSERA_CUDA_ARCHS_STRING; }
const char* git_revision() noexcept { return TESSERA_GIT_REVISION_STRING; }

}  // namespace tessera
