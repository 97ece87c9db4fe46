// The `tessera` command line. Each command lives in its own cmd_*.cpp and is registered here.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "commands.hpp"
#include "tessera/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"tessera: dynamic block-sparse attention runtime for video diffusion transformers"};
  app.require_subcommand(1);
  tessera::tools::register_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tessera::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
