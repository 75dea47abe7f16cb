#include <string>
#include <utility>
#include <vector>

#include "backends/builtin.h"
#include "backends/factories.h"
#include "registry/builtin_registration.h"
#include "registry/option_checks.h"

namespace diffattn {

void register_cudnn_attn(Registry& registry) {
  BackendDescriptor d;
  d.name = "CUDNN_ATTN";
  d.display_name = "CUDNN_ATTN";
  d.summary = "cuDNN fused flash attention through the cuDNN graph API";
  d.caps.devices = {DeviceKind::kCuda};
  d.caps.dtypes = {DType::kFloat16, DType::kBFloat16};
  d.caps.min_head_size = 8;
  d.caps.max_head_size = 256;
  d.caps.head_size_multiple = 8;
  d.caps.dense_mask = false;  // key padding runs through per-batch sequence lengths
  d.extra_problem_reasons = [](const ProblemShape& problem) {
    std::vector<std::string> reasons;
    if (problem.seqlen_kv <= 1) {
      reasons.push_back("cuDNN fused attention does not support key/value sequence length " +
                        std::to_string(problem.seqlen_kv) + "; select TORCH_SDPA for this shape");
    }
    return reasons;
  };
  d.validate_options = [](const AttentionSpec& spec) { return check_extra_keys(spec, "CUDNN_ATTN", {}); };
  d.create = create_cudnn_attn_backend;
  register_or_warn(registry, std::move(d));
}

}  // namespace diffattn
