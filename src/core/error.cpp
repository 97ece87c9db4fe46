#include "tessera/error.hpp"

#include <utility>

namespace tessera {

const char* error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kCudaError: return "cuda error";
    case ErrorCode::kIoError: return "io error";
    case ErrorCode::kFormatError: return "format error";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

namespace {
std::string format_what(ErrorCode code, const std::string& argument, const std::string& message) {
  std::string s = "tessera: ";
  s += error_code_name(code);
  s += ": ";
  if (!argument.empty()) {
    s += argument;
    s += ": ";
  }
  s += message;
  return s;
}
}  // namespace

Error::Error(ErrorCode code, std::string argument, std::string message)
    : std::runtime_error(format_what(code, argument, message)),
      code_(code),
      argument_(std::move(argument)),
      message_(std::move(message)) {}

}  // namespace tessera
