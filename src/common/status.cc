#include "diffattn/status.h"

namespace diffattn {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidConfig: return "invalid_config";
    case ErrorCode::kUnknownBackend: return "unknown_backend";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kInvalidInput: return "invalid_input";
    case ErrorCode::kCudaError: return "cuda_error";
    case ErrorCode::kInternal: return "internal";
  }
  return "internal";
}

int exit_code_for(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return 0;
    case ErrorCode::kInvalidConfig:
    case ErrorCode::kUnknownBackend:
    case ErrorCode::kInvalidInput: return 2;
    case ErrorCode::kUnsupported:
    case ErrorCode::kUnavailable: return 3;
    case ErrorCode::kCudaError:
    case ErrorCode::kInternal: return 1;
  }
  return 1;
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(error_code_name(code_)) + ": " + message_;
}

}  // namespace diffattn
