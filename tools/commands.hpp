#pragma once
// Registration of the `tessera` subcommands. Each add_* function lives in its own cmd_*.cpp file; a command
// runs inside its CLI11 callback, so errors thrown there reach main()'s handler.
#include <CLI/CLI.hpp>

namespace tessera::tools {

void add_version_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_masks_command(CLI::App& app);
void add_inspect_mask_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_profile_command(CLI::App& app);
void add_compile_table_command(CLI::App& app);
void add_profile_refeature_command(CLI::App& app);

/// Registers every subcommand (add new ones here).
inline void register_commands(CLI::App& app) {
  add_version_command(app);
  add_inspect_command(app);
  add_masks_command(app);
  add_inspect_mask_command(app);
  add_run_command(app);
  add_profile_command(app);
  add_compile_table_command(app);
  add_profile_refeature_command(app);
}

}  // namespace tessera::tools
