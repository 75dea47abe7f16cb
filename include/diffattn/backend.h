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
  std::string role = "self";
  bool explicit_choice = false;       // the user named this backend: never substitute another
  std::optional<AttentionSpec> spec;  // absent for a platform default
  PlatformInfo platform;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // Runs one call that the layer (Attention::forward) has checked (validate_problem, the layer's
  // heads and head size) and completed (scale, causal): backends do not check it again. `stream`
  // is a cudaStream_t for CUDA views (nullptr: the default stream) and ignored for CPU views. A
  // call the kernels cannot run fails before anything is written: `out` and `lse` are untouched.
  virtual Status forward(const AttentionProblem& problem, void* stream) = 0;
};

}  // namespace diffattn
