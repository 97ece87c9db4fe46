#pragma once
// A command that needs one subcommand (`tessera`, `tessera masks`, `tessera inspect`), with an unknown one named.
// CLI11's require_subcommand(1) reports `tessera bogus` as "A subcommand is required"; here at most one is allowed,
// so an unknown word is left over as an extra (reported by unknown_subcommand_message), and a final callback
// requires that one was given.
#include <CLI/CLI.hpp>

#include <optional>
#include <string>

namespace tessera::tools {

/// Exactly one subcommand of `app` is required: none given -> CLI::RequiredError("A subcommand is required"),
/// an unknown word -> CLI::ExtrasError (see unknown_subcommand_message). Replaces app's final callback.
inline void require_one_subcommand(CLI::App* app) {
  app->require_subcommand(0, 1);
  app->final_callback([app] {
    if (app->get_subcommands().empty()) throw CLI::RequiredError("A subcommand");
  });
}

/// After app.parse() threw CLI::ExtrasError: when the innermost command given expects a subcommand and got none,
/// the left-over word is an unknown subcommand; returns "tessera masks: unknown command 'bogus' (commands: ...)".
/// nullopt otherwise (an extra argument or option of a command: CLI11's own message applies).
inline std::optional<std::string> unknown_subcommand_message(const CLI::App& app, const std::string& program) {
  const CLI::App* a = &app;
  std::string path = program;
  while (!a->get_subcommands().empty()) {
    a = a->get_subcommands().front();
    path += " " + a->get_name();
  }
  const auto known = a->get_subcommands([](const CLI::App*) { return true; });
  const auto extras = a->remaining();
  if (known.empty() || extras.empty() || extras.front().empty() || extras.front()[0] == '-') return std::nullopt;
  std::string names;
  for (const CLI::App* s : known) names += (names.empty() ? "" : ", ") + s->get_name();
  return path + ": unknown command '" + extras.front() + "' (commands: " + names + ")";
}

}  // namespace tessera::tools
