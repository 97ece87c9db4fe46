#pragma once
/// @file error.hpp
/// The one exception type Tessera throws. Every error names the argument it concerns (e.g. "q", "mask.indices",
/// "geometry.block_q") so callers can report it precisely. Errors are raised before any kernel is launched;
/// nothing is written to outputs when an error is raised.
#include <stdexcept>
#include <string>

namespace tessera {

/// Category of an Error.
enum class ErrorCode {
  kInvalidArgument,  ///< an argument violates the contract (shape, dtype, stride, range, ...)
  kUnsupported,      ///< valid in principle, not supported by this build/GPU (e.g. head_dim 96 today)
  kCudaError,        ///< a CUDA runtime call failed
  kIoError,          ///< a file could not be read or written
  kFormatError,      ///< a file or artifact is malformed or has the wrong version
  kInternal,         ///< a Tessera bug: an invariant failed
};

/// Name of an ErrorCode: "invalid argument", "unsupported", "cuda error", "io error", "format error", "internal".
const char* error_code_name(ErrorCode code) noexcept;

/// Exception thrown by every Tessera entry point.
/// what() reads "tessera: <code name>: <argument>: <message>" (the argument part omitted when empty).
class Error : public std::runtime_error {
 public:
  /// @param code      category
  /// @param argument  the argument the error concerns, dotted path style ("mask.row_offsets"); may be empty
  /// @param message   what is wrong, with the offending values
  Error(ErrorCode code, std::string argument, std::string message);

  ErrorCode code() const noexcept { return code_; }
  /// The argument the error concerns, e.g. "k" or "geometry.block_kv"; empty when not argument-specific.
  const std::string& argument() const noexcept { return argument_; }
  /// The bare message, without the "tessera: ..." prefix.
  const std::string& message() const noexcept { return message_; }

 private:
  ErrorCode code_;
  std::string argument_;
  std::string message_;
};

}  // namespace tessera
