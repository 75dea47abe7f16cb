#pragma once
// The layer's one check of a call against what its backend declares (BackendDescriptor::unsupported_reasons:
// capabilities and extra reasons), the same for every backend. The verdict is kept per call shape: a layer
// sees a few shapes, so a call costs a lookup rather than every check again.

#include <cstddef>
#include <shared_mutex>
#include <string>
#include <vector>

#include "diffattn/problem.h"
#include "diffattn/registry.h"
#include "diffattn/status.h"

namespace diffattn {

class BackendCallCheck {
 public:
  // `explicit_choice`: the configuration named the backend; an automatic choice is not held to the
  // reasons a backend declares for named choices only (BackendDescriptor::explicit_problem_reasons).
  BackendCallCheck(const BackendDescriptor& descriptor, bool explicit_choice);

  // Ok, or kUnsupported: "<backend> cannot run this call: <reasons>." and what to select instead.
  Status check(const ProblemShape& shape) const;

  static constexpr std::size_t kMaxVerdicts = 16;

 private:
  struct Verdict {
    ProblemShape shape;
    std::string refusal;  // empty: the backend runs calls of this shape
  };
  std::string refusal_for(const ProblemShape& shape) const;

  BackendDescriptor declared_;  // the descriptor's name, origin, capabilities and problem reasons only
  bool explicit_choice_;
  mutable std::shared_mutex mu_;
  mutable std::vector<Verdict> verdicts_;  // at most kMaxVerdicts; when full the oldest is replaced
  mutable std::size_t oldest_ = 0;
};

}  // namespace diffattn
