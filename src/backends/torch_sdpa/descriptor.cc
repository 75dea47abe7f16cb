#include <utility>

#include "backends/builtin.h"
#include "backends/factories.h"
#include "registry/builtin_registration.h"
#include "registry/option_checks.h"

namespace diffattn {

void register_torch_sdpa(Registry& registry) {
  BackendDescriptor d;
  d.name = "TORCH_SDPA";
  d.summary = "exact scaled-dot-product attention (PyTorch SDPA semantics); the correctness reference";
  d.caps.devices = {DeviceKind::kCpu, DeviceKind::kCuda};
  d.caps.dtypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
  d.caps.min_head_size = 8;
  d.caps.max_head_size = 512;
  d.caps.varlen = true;
  d.head_size_reasons.explicit_reason =
      "head_size={head} is unsupported. Supported head sizes: {rule}. No built-in backend runs this head size; "
      "register one that does.";
  // The CUDA kernels are built for sm_80 (and its PTX, which newer GPUs compile at load).
  d.kernels = {{DeviceKind::kCpu, "tiled, vectorised"}, {DeviceKind::kCuda, "tiled", {{80, 1 << 10}}}};
  d.validate_options = [](const AttentionSpec& spec) { return check_extra_keys(spec, "TORCH_SDPA", {}); };
  d.create = create_torch_sdpa_backend;
  register_or_warn(registry, std::move(d));
}

}  // namespace diffattn
