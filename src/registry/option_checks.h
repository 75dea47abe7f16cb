#pragma once
// Checks shared by backend descriptors: which typed blocks and extra keys a backend reads, and
// value sets of the blocks it owns. Messages name the backend, the field and what to do instead.

#include <string>
#include <string_view>
#include <vector>

#include "diffattn/config.h"
#include "diffattn/registry.h"
#include "diffattn/status.h"

namespace diffattn {

// Typed blocks set on `spec` that `descriptor` does not consume are configuration errors.
Status check_option_blocks(const BackendDescriptor& descriptor, const AttentionSpec& spec);

// Every key of spec.extra must be one the backend reads.
Status check_extra_keys(const AttentionSpec& spec, std::string_view backend,
                        const std::vector<std::string>& accepted_keys);

// `value` (of field `field`) must be one of `allowed`.
Status check_value_in(std::string_view backend, std::string_view field, const std::string& value,
                      const std::vector<std::string>& allowed);

}  // namespace diffattn
