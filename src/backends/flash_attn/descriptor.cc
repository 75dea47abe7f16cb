#include <string>
#include <utility>
#include <vector>

#include "backends/builtin.h"
#include "backends/factories.h"
#include "kernels/cuda/flash/flash_checks.h"
#include "kernels/cuda/flash/flash_config.h"
#include "registry/builtin_registration.h"
#include "registry/option_checks.h"

namespace diffattn {

namespace {

constexpr CapabilityRange kBlackwell{100, 129};

// FA2/FA3-class kernels serve sm_80..sm_90; Blackwell accepts only an FA4-class kernel (the
// seeds), which the platform's features report.
std::vector<PlatformNeed> cuda_needs() {
  return {
      need(PlatformFact::kArchitecture, "compute capability < 8.0").on({{80, 1 << 10}}),
      need(PlatformFact::kFlashAttn4Kernels,
           "Blackwell requires an FA4-class kernel, which this build does not hold; diffattn's FA2/FA3-class "
           "kernels are for Hopper and Ampere/Ada only")
          .on({kBlackwell}),
      need(PlatformFact::kFlashAttnKernels, "no FLASH_ATTN kernels are built for {sm} ({compiled})")
          .on({{80, 99}, {130, 1 << 10}}),
  };
}

}  // namespace

void register_flash_attn(Registry& registry) {
  BackendDescriptor d;
  d.name = "FLASH_ATTN";
  d.summary = "diffattn FlashAttention kernels: Hopper (wgmma + TMA) and Ampere/Ada (mma.sync)";
  d.caps.devices = {DeviceKind::kCuda};
  d.caps.dtypes = {DType::kFloat16, DType::kBFloat16};
  d.caps.head_sizes = {flash::kHeadSizes.begin(), flash::kHeadSizes.end()};
  d.caps.dense_mask = false;  // key-padding masks [B, Skv] are applied inside the kernel
  d.caps.varlen = true;
  d.cuda.needs = cuda_needs();
  d.head_size_reasons.default_reason = "head_size {head} is not compiled (compiled: {rule})";
  d.kernels = {{DeviceKind::kCuda, flash::kernels_text() + "; no FA4-class kernel", {{80, 90}}}};
  // Rules beyond the capability list: the kernels need Dv == D and at least one key.
  d.extra_problem_reasons = [](const ProblemShape& problem) {
    std::vector<std::string> reasons;
    for (auto check : {flash::check_value_head_size_matches, flash::check_has_keys})
      if (auto reason = check(problem)) reasons.push_back(*std::move(reason));
    return reasons;
  };
  d.validate_options = [](const AttentionSpec& spec) { return check_extra_keys(spec, "FLASH_ATTN", {}); };
  d.create = create_flash_attn_backend;
  register_or_warn(registry, std::move(d));
}

}  // namespace diffattn
