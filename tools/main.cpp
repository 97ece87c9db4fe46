// The `tessera` command line. Each command lives in its own cmd_*.cpp and is registered here.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "commands.hpp"
#include "subcommand_required.hpp"
#include "tessera/error.hpp"
#include "tessera/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"tessera: dynamic block-sparse attention runtime for video diffusion transformers"};
  tessera::tools::require_one_subcommand(&app);
  app.option_defaults()->always_capture_default();  // --help shows every option's default
  app.set_version_flag("--version", std::string("tessera ") + tessera::version() + " (" + tessera::git_revision() + ")");
  tessera::tools::register_commands(app);
  try {
    app.parse(argc, argv);
  } catch (...) {
    // What the command printed comes before its error message also when stdout is a pipe or file (buffered) and
    // stderr is not: flush, then report below.
    std::fflush(stdout);
    try {
      throw;
    } catch (const CLI::ExtrasError& e) {
      if (const auto msg = tessera::tools::unknown_subcommand_message(app, "tessera")) {
        std::fprintf(stderr, "%s\nRun with --help for more information.\n", msg->c_str());
        return e.get_exit_code();
      }
      return app.exit(e);
    } catch (const CLI::ParseError& e) {
      return app.exit(e);
    } catch (const tessera::Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tessera: error: %s\n", e.what());
      return 1;
    }
  }
  // A command's report is its result: output that could not be written (a full disk, /dev/full, a closed pipe) is a
  // failure, not a success with nothing printed.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "tessera: error: writing the standard output failed: %s\n", std::strerror(errno));
    return 1;
  }
  return 0;
}
