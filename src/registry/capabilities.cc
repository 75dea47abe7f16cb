#include <algorithm>
#include <string>
#include <vector>

#include "diffattn/registry.h"
#include "registry/capability_checks.h"

namespace diffattn {

bool Capabilities::supports_head_size(int head_size) const {
  if (!head_sizes.empty()) {
    return std::find(head_sizes.begin(), head_sizes.end(), head_size) != head_sizes.end();
  }
  return head_size >= min_head_size && head_size <= max_head_size && head_size % head_size_multiple == 0;
}

std::string Capabilities::head_size_rule() const {
  if (!head_sizes.empty()) {
    std::string out;
    for (int h : head_sizes) out += (out.empty() ? "" : ", ") + std::to_string(h);
    return out;
  }
  if (min_head_size <= 1 && max_head_size >= (1 << 20) && head_size_multiple == 1) return "any";
  const std::string range = std::to_string(min_head_size) + ".." + std::to_string(max_head_size);
  if (head_size_multiple > 1) return "multiples of " + std::to_string(head_size_multiple) + " in " + range;
  return range;
}

std::vector<std::string> capability_reasons(const Capabilities& caps, const ProblemShape& problem) {
  using Check = capability::Reason (*)(const Capabilities&, const ProblemShape&);
  static constexpr Check kChecks[] = {
      capability::check_device, capability::check_dtype, capability::check_head_size,
      capability::check_gqa,    capability::check_causal, capability::check_mask,
      capability::check_lse,    capability::check_cross,  capability::check_varlen,
      capability::check_video_geometry, capability::check_gate,
  };
  std::vector<std::string> reasons;
  for (Check check : kChecks) {
    if (auto reason = check(caps, problem)) reasons.push_back(std::move(*reason));
  }
  return reasons;
}

}  // namespace diffattn
