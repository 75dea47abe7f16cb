#pragma once
// What FLASH_ATTN's kernels accept, as small named predicates over the problem's shape: each
// returns a reason or nothing, and the backend joins them into one message.

#include <optional>
#include <string>
#include <vector>

#include "diffattn/problem.h"

namespace diffattn::flash {

std::optional<std::string> check_head_size_compiled(const ProblemShape& shape);
std::optional<std::string> check_value_head_size_matches(const ProblemShape& shape);
std::optional<std::string> check_half_precision(const ProblemShape& shape);
std::optional<std::string> check_no_dense_mask(const ProblemShape& shape);
std::optional<std::string> check_has_keys(const ProblemShape& shape);

// Every reason the FLASH_ATTN kernels cannot run `shape` (empty: they can).
std::vector<std::string> flash_shape_reasons(const ProblemShape& shape);

// Which FLASH_ATTN kernel serves a compute capability: "hopper" (sm_90), "ampere" (sm_80..89), or nothing.
std::optional<std::string> flash_kernel_for_capability(int cc_major, int cc_minor);

}  // namespace diffattn::flash
