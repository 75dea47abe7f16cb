#pragma once
// A backend instance runs one layer's attention; it reads only its own typed options.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "diffattn/config.h"
#include "diffattn/platform.h"
#include "diffattn/problem.h"
#include "diffattn/status.h"

namespace diffattn {

struct BackendInit {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_size = 0;
  std::optional<float> scale;
  bool causal = false;
  std::string role = "self";
  bool explicit_choice = false;       // the user named this backend: never substitute another
  std::optional<AttentionSpec> spec;  // absent for a platform default
  PlatformInfo platform;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // Runs attention. `stream` is a cudaStream_t for CUDA views (nullptr: the default stream) and
  // ignored for CPU views. Validates before writing: on error, `out` and `lse` are untouched.
  virtual Status forward(const AttentionProblem& problem, void* stream) = 0;
};

}  // namespace diffattn
