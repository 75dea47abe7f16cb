#include <string>
#include <utility>
#include <vector>

#include "backends/builtin.h"
#include "backends/cudnn_attn/cudnn_attn_checks.h"
#include "backends/factories.h"
#include "registry/builtin_registration.h"
#include "registry/option_checks.h"

namespace diffattn {

void register_cudnn_attn(Registry& registry) {
  BackendDescriptor d;
  d.name = "CUDNN_ATTN";
  d.summary = "cuDNN fused flash attention through the cuDNN graph API";
  d.caps.devices = {DeviceKind::kCuda};
  d.caps.dtypes = {DType::kFloat16, DType::kBFloat16};
  d.caps.min_head_size = 8;
  d.caps.max_head_size = 256;
  d.caps.head_size_multiple = 8;
  // Key-padding prefixes run as per-batch key lengths, other masks as an additive bias, packed
  // batches as ragged offsets (mask_bias.h).
  d.caps.dense_mask = true;
  d.caps.varlen = true;
  d.cuda.needs = {
      need(PlatformFact::kCudnn, "no cuDNN library found").at_least(1).only_default(),
      need(PlatformFact::kCudnn, "")
          .at_least(90000)
          .when_explicit("needs cuDNN 9 or newer on {device} ({found}). Install cuDNN 9 (e.g. the libcudnn9 "
                         "packages) or select TORCH_SDPA.")
          .only_explicit(),
      // Before 9.5 cuDNN has no tuned Blackwell kernels, so it is not worth choosing unasked there.
      need(PlatformFact::kCudnn, "cuDNN {cudnn} < 9.5 has no tuned Blackwell fused attention")
          .at_least(90500)
          .on({{100, 129}})
          .warn("Detected Blackwell {sm} but cuDNN {cudnn} < 9.5: no tuned Blackwell fused attention. Automatic "
                "selection continues down the route.")
          .only_default()};
  d.head_size_reasons.explicit_reason =
      "head_size={head} is unsupported. cuDNN fused attention needs a head size that is a multiple of 8 and at most "
      "256. Select FLASHINFER_ATTN or TORCH_SDPA.";
  d.head_size_reasons.default_reason = "head_dim {head} is outside cuDNN fused attention (multiples of 8, 8-256)";
  d.kernels = {{DeviceKind::kCuda, "through the cuDNN 9 graph API"}};
  // Chosen automatically, CUDNN_ATTN runs a call with one key or none on TORCH_SDPA's CUDA kernel.
  d.explicit_problem_reasons = [](const ProblemShape& problem) {
    std::vector<std::string> reasons;
    if (auto reason = cudnn_attn::check_kv_length_above_one(problem.seqlen_kv)) reasons.push_back(*std::move(reason));
    return reasons;
  };
  d.validate_options = [](const AttentionSpec& spec) { return check_extra_keys(spec, "CUDNN_ATTN", {}); };
  d.create = create_cudnn_attn_backend;
  register_or_warn(registry, std::move(d));
}

}  // namespace diffattn
