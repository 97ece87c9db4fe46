#pragma once
// The --families option of the CLI commands: the selected corpus families, with errors (unknown or repeated family)
// naming the option instead of the library field.
#include <string>
#include <vector>

#include "tessera/error.hpp"
#include "tessera_corpus/family.hpp"

namespace tessera::tools {

/// corpus::selected_families(opt); its Error (kInvalidArgument) is rethrown naming "--families".
inline std::vector<std::string> families_option(const corpus::CorpusOptions& opt) {
  try {
    return corpus::selected_families(opt);
  } catch (const Error& e) {
    throw Error(e.code(), "--families", e.message());
  }
}

}  // namespace tessera::tools
