#pragma once
// The registry maps stable configuration names (TORCH_SDPA, FLASH_ATTN, ...) to backend
// descriptors: capabilities as data, named checks, the option validator and the factory. It is
// filled by one visible call per backend (register_builtin_backends in diffattn/builtin_backends.h),
// never by static initialisers.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "diffattn/backend.h"
#include "diffattn/dtype.h"
#include "diffattn/platform.h"
#include "diffattn/problem.h"
#include "diffattn/requirements.h"
#include "diffattn/status.h"

namespace diffattn {

struct Capabilities {
  std::vector<DeviceKind> devices;
  std::vector<DType> dtypes;
  std::vector<int> head_sizes;  // explicit list; when empty the range rule below applies
  int min_head_size = 1;
  int max_head_size = 1 << 20;
  int head_size_multiple = 1;
  bool gqa = true;
  bool causal = true;
  bool key_padding_mask = true;
  bool dense_mask = true;
  bool lse = true;
  bool varlen = false;
  bool cross = true;  // Sq != Skv
  // Sparse video backends: calls must carry AttentionProblem::video; the backend takes
  // AttentionProblem::gate (the layer refuses a gate for every other backend).
  bool needs_video_geometry = false;
  bool gate = false;
  // Computes in 8-bit formats (INT8 Q*K^T, FP8 P*V): its error is a share of the output's size, so
  // tests hold it to the 8-bit tolerance, and it is chosen only when named.
  bool quantized = false;
  // Typed AttentionSpec blocks the backend consumes: "quant", "skip_softmax", "block_sparse",
  // "fastvideo_vsa_topk". The only declaration of which backend owns a block: configuration
  // validation derives its owners from here (config/block_owners.cc), from the registry its caller passes.
  std::vector<std::string> option_blocks;

  bool supports_head_size(int head_size) const;
  std::string head_size_rule() const;  // "64, 96, 128, 192, 256" or "multiples of 8 in 8..256"
};

// Reasons a problem is outside `caps` (empty: supported). One small named predicate per rule.
std::vector<std::string> capability_reasons(const Capabilities& caps, const ProblemShape& problem);

// Which diffattn kernels run a backend on one kind of device, for `diffattn backends --matrix`.
struct DeviceKernels {
  DeviceKind device = DeviceKind::kCpu;
  std::string description;  // "sm_80 (mma.sync) and sm_90a (wgmma + TMA)"
  // CUDA: the compute capabilities (major * 10 + minor) the kernels run on; empty: every one.
  std::vector<CapabilityRange> archs = {};
};

using BackendFactory = std::function<Result<std::unique_ptr<Backend>>(const BackendInit&)>;

struct BackendDescriptor {
  std::string name;          // stable configuration name, upper case
  std::string summary;       // one line for `diffattn backends`
  std::string origin;        // empty for built-ins; the library path for a plugin's backends
  Capabilities caps;
  // What the backend needs of a CUDA platform, evaluated by the platform (diffattn/requirements.h).
  CudaRequirements cuda;
  HeadSizeNeed head_size_reasons;
  // diffattn's kernels per device (empty: registered, but no kernel in diffattn).
  std::vector<DeviceKernels> kernels;
  // Why the backend cannot run on `platform` at all (kernels not built for the architecture, a
  // missing library), or nullopt. Routing order stays in the platform.
  std::function<std::optional<std::string>(const PlatformInfo&)> unavailable_reason;
  // Backend-specific reasons beyond `caps` for one call (empty: supported).
  std::function<std::vector<std::string>(const ProblemShape&)> extra_problem_reasons;
  // Reasons that refuse a call only when the configuration named the backend: chosen automatically,
  // the backend runs such a call another way (CUDNN_ATTN hands one-key calls to TORCH_SDPA's kernel).
  std::function<std::vector<std::string>(const ProblemShape&)> explicit_problem_reasons;
  // Value checks on the typed blocks this backend owns (config-time checks already ran).
  std::function<Status(const AttentionSpec&)> validate_options;
  BackendFactory create;

  // Why a call of `problem`'s shape is refused: `caps`, then the extra reasons, then, for a backend the
  // configuration named, the explicit ones. The attention layer checks every call with this.
  std::vector<std::string> unsupported_reasons(const ProblemShape& problem, bool explicit_choice = true) const;
};

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Adds a new name. Registering a name twice is an error; use replace_implementation instead.
  Status add(BackendDescriptor descriptor);
  // The Python system's register_diffusion_backend: swap the implementation behind an existing name at run
  // time without changing the name. The last registration wins.
  Status replace_implementation(std::string_view name, BackendFactory factory);
  bool is_overridden(std::string_view name) const;
  void clear_override(std::string_view name);

  // Exact, case-sensitive lookup; callers upper-case first. Unknown names fail with the list.
  Result<const BackendDescriptor*> find(std::string_view name) const;
  std::vector<std::string> names() const;  // registration order
  Result<std::unique_ptr<Backend>> create(std::string_view name, const BackendInit& init) const;

 private:
  mutable std::shared_mutex mu_;
  std::vector<std::unique_ptr<BackendDescriptor>> descriptors_;
  std::map<std::string, BackendFactory, std::less<>> overrides_;
};

// Loads a plugin library (include/diffattn/plugin.h) and registers its backends in `registry`:
// all of them, or none when the library or any of its backends is refused. Returns the names added. A plugin name must not be taken
// (built-in or from another plugin: the first registration wins). The library stays loaded while
// the registry or any backend created from it lives.
Result<std::vector<std::string>> load_plugin(std::string_view path, Registry& registry);

}  // namespace diffattn
