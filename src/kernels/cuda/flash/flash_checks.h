#pragma once
// What FLASH_ATTN's kernels accept, as small named predicates over the problem's shape: each
// returns a reason or nothing, and the backend joins them into one message.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/reason.h"
#include "diffattn/problem.h"

namespace diffattn::flash {

Reason check_head_size_compiled(const ProblemShape& shape);
Reason check_value_head_size_matches(const ProblemShape& shape);
Reason check_half_precision(const ProblemShape& shape);
Reason check_no_dense_mask(const ProblemShape& shape);
Reason check_has_keys(const ProblemShape& shape);

// Every reason the FLASH_ATTN kernels cannot run `shape` (empty: they can).
std::vector<std::string> flash_shape_reasons(const ProblemShape& shape);

// FLASH_ATTN's kernel families.
enum class FlashKernel { kAmpere, kHopper };

// One family: the architectures it serves and how it is described. kKernels is the one table the
// dispatch, the backend's declaration and the documentation read.
struct FlashKernelInfo {
  FlashKernel kernel;
  int min_capability, max_capability;  // major * 10 + minor, inclusive
  const char* target;                  // the architecture it is compiled for: "sm_90a"
  const char* description;             // "wgmma + TMA"
};
inline constexpr FlashKernelInfo kKernels[] = {
    {FlashKernel::kAmpere, 80, 89, "sm_80", "mma.sync"},
    {FlashKernel::kHopper, 90, 90, "sm_90a", "wgmma + TMA"},
};

// Which FLASH_ATTN kernel serves a compute capability, or nothing.
std::optional<FlashKernel> flash_kernel_for_capability(int cc_major, int cc_minor);
std::string_view kernel_name(FlashKernel kernel);  // "ampere", "hopper"
// "sm_80 mma.sync and sm_90a wgmma + TMA": what is compiled.
std::string kernels_text();
// "sm_80..sm_89 and sm_90": the devices the kernels serve.
std::string architectures_text();

}  // namespace diffattn::flash
