#include "layer/backend_call_check.h"

#include <mutex>
#include <string_view>
#include <utility>

#include "common/strings.h"

namespace diffattn {
namespace {

// The reference backend, which runs every shape the layer accepts: what a refusal offers instead.
constexpr std::string_view kReferenceBackend = "TORCH_SDPA";

bool names_an_alternative(const std::string& reasons) {
  return reasons.find("select ") != std::string::npos || reasons.find("Select ") != std::string::npos;
}

}  // namespace

BackendCallCheck::BackendCallCheck(const BackendDescriptor& descriptor, bool explicit_choice)
    : explicit_choice_(explicit_choice) {
  declared_.name = descriptor.name;
  declared_.origin = descriptor.origin;
  declared_.caps = descriptor.caps;
  declared_.extra_problem_reasons = descriptor.extra_problem_reasons;
  declared_.explicit_problem_reasons = descriptor.explicit_problem_reasons;
}

std::string BackendCallCheck::refusal_for(const ProblemShape& shape) const {
  const std::vector<std::string> reasons = declared_.unsupported_reasons(shape, explicit_choice_);
  if (reasons.empty()) return "";
  const std::string joined = join(reasons, "; ");
  std::string who = declared_.name;
  if (!declared_.origin.empty()) who += " (plugin " + declared_.origin + ")";
  std::string refusal = who + " cannot run this call: " + joined + (joined.back() == '.' ? "" : ".");
  if (declared_.name != kReferenceBackend && !names_an_alternative(joined))
    refusal += " Select " + std::string(kReferenceBackend) + " instead.";
  return refusal;
}

Status BackendCallCheck::check(const ProblemShape& shape) const {
  {
    std::shared_lock lock(mu_);
    for (const Verdict& verdict : verdicts_)
      if (verdict.shape == shape) return verdict.refusal.empty() ? Status::Ok() : Unsupported(verdict.refusal);
  }
  std::string refusal = refusal_for(shape);
  {
    std::unique_lock lock(mu_);
    bool known = false;
    for (const Verdict& verdict : verdicts_) known = known || verdict.shape == shape;
    if (!known && verdicts_.size() < kMaxVerdicts) {
      verdicts_.push_back({shape, refusal});
    } else if (!known) {
      verdicts_[oldest_] = {shape, refusal};
      oldest_ = (oldest_ + 1) % kMaxVerdicts;
    }
  }
  return refusal.empty() ? Status::Ok() : Unsupported(std::move(refusal));
}

}  // namespace diffattn
