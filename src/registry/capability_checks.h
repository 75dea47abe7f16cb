#pragma once
// One named predicate per capability rule. Each returns why `problem` is outside `caps`, or
// nullopt; capability_reasons runs them all so adding a rule is one function and one list entry.

#include <optional>
#include <string>

#include "common/reason.h"
#include "diffattn/problem.h"
#include "diffattn/registry.h"

namespace diffattn::capability {

using diffattn::Reason;

Reason check_device(const Capabilities& caps, const ProblemShape& problem);
Reason check_dtype(const Capabilities& caps, const ProblemShape& problem);
Reason check_head_size(const Capabilities& caps, const ProblemShape& problem);
Reason check_gqa(const Capabilities& caps, const ProblemShape& problem);
Reason check_causal(const Capabilities& caps, const ProblemShape& problem);
Reason check_mask(const Capabilities& caps, const ProblemShape& problem);
Reason check_lse(const Capabilities& caps, const ProblemShape& problem);
Reason check_cross(const Capabilities& caps, const ProblemShape& problem);
Reason check_varlen(const Capabilities& caps, const ProblemShape& problem);
Reason check_video_geometry(const Capabilities& caps, const ProblemShape& problem);
Reason check_gate(const Capabilities& caps, const ProblemShape& problem);

}  // namespace diffattn::capability
