#pragma once
// Results, not exceptions, at every public boundary: a closed set of codes and a message that
// says what was asked, what failed and what to do instead.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace diffattn {

enum class ErrorCode {
  kOk,
  kInvalidConfig,      // a configuration value is malformed or inconsistent
  kUnknownBackend,     // a backend name that is not registered
  kUnsupported,        // a valid request that this platform/backend cannot run
  kUnavailable,        // a dependency (library, kernel build) is missing
  kInvalidInput,       // tensors or files that do not describe a valid problem
  kCudaError,          // a CUDA or cuDNN call failed
  kInternal,           // a bug in diffattn
};

// Stable lower-case name used in JSON error output, e.g. "invalid_config".
std::string_view error_code_name(ErrorCode code);

// Process exit code for the command-line tool: 2 invalid configuration or usage, 3 a valid
// request that cannot run here, 1 anything else.
int exit_code_for(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status InvalidConfig(std::string m) { return {ErrorCode::kInvalidConfig, std::move(m)}; }
inline Status UnknownBackend(std::string m) { return {ErrorCode::kUnknownBackend, std::move(m)}; }
inline Status Unsupported(std::string m) { return {ErrorCode::kUnsupported, std::move(m)}; }
inline Status Unavailable(std::string m) { return {ErrorCode::kUnavailable, std::move(m)}; }
inline Status InvalidInput(std::string m) { return {ErrorCode::kInvalidInput, std::move(m)}; }
inline Status CudaError(std::string m) { return {ErrorCode::kCudaError, std::move(m)}; }
inline Status Internal(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace diffattn

#define DIFFATTN_CONCAT_INNER(a, b) a##b
#define DIFFATTN_CONCAT(a, b) DIFFATTN_CONCAT_INNER(a, b)

#define DIFFATTN_RETURN_IF_ERROR(expr)               \
  do {                                               \
    ::diffattn::Status diffattn_status_ = (expr);    \
    if (!diffattn_status_.ok()) return diffattn_status_; \
  } while (0)

#define DIFFATTN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()

#define DIFFATTN_ASSIGN_OR_RETURN(lhs, expr) \
  DIFFATTN_ASSIGN_OR_RETURN_IMPL(DIFFATTN_CONCAT(diffattn_result_, __LINE__), lhs, expr)
