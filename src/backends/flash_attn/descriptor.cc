#include <string>
#include <utility>
#include <vector>

#include "backends/builtin.h"
#include "backends/factories.h"
#include "kernels/cuda/flash/flash_checks.h"
#include "registry/builtin_registration.h"
#include "registry/option_checks.h"

namespace diffattn {

// Which devices have FLASH_ATTN kernels is routing policy: the CUDA platform decides from the
// platform's features, so the descriptor carries no unavailable_reason.
void register_flash_attn(Registry& registry) {
  BackendDescriptor d;
  d.name = "FLASH_ATTN";
  d.display_name = "FLASH_ATTN";
  d.summary = "diffattn FlashAttention kernels: Hopper (wgmma + TMA) and Ampere/Ada (mma.sync)";
  d.caps.devices = {DeviceKind::kCuda};
  d.caps.dtypes = {DType::kFloat16, DType::kBFloat16};
  d.caps.head_sizes = {64, 96, 128, 192, 256};
  d.caps.dense_mask = false;  // key-padding masks [B, Skv] are applied inside the kernel
  d.caps.varlen = true;
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
