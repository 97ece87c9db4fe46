// `tessera version`: library version, git revision, compiled CUDA architectures and visible GPUs.
#include <fmt/core.h>

#include "commands.hpp"
#include "tessera/cuda_types.hpp"
#include "tessera/version.hpp"

namespace tessera::tools {

void add_version_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("version", "Print the version, git revision, CUDA targets and visible GPUs");
  cmd->callback([] {
    fmt::print("tessera {}\n", version());
    fmt::print("git revision: {}\n", git_revision());
    fmt::print("kernels built for: {}\n", built_cuda_architectures());
    fmt::print("CUDA devices visible: {}\n", cuda_device_count());
  });
}

}  // namespace tessera::tools
