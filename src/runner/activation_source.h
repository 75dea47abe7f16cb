#pragma once
// Where one role's Q/K/V come from: the deterministic generator, or real dumps on disk.

#include <string>
#include <vector>

#include "diffattn/status.h"
#include "runner/activation_generator.h"
#include "runner/host_tensor.h"
#include "runner/workload_plan.h"

namespace diffattn::runner {

struct ActivationSample {
  int layer = 0;
  int step = 0;
  std::string label;      // "layer 15 step 0" or the dump folder
  std::string dump_dir;   // empty: generated
};

struct QkvTensors {
  HostTensor q, k, v;
};

// The samples of one role: the plan's layers x steps, or every dump found for the role under
// `activations_dir` (DIR/<role>/{q,k,v}.npy or DIR/<role>/qkv.safetensors, or the same in
// DIR/<role>/<sample>/ for several); a role without a folder there keeps generated inputs.
Result<std::vector<ActivationSample>> role_samples(const WorkloadPlan& plan, const RolePlan& role,
                                                   const std::string& activations_dir);

// With --activations at least one role must have dumps: a folder holding none (empty, or the wrong
// folder) is refused rather than run on generated inputs under its name.
Status check_some_role_has_dumps(const WorkloadPlan& plan, const std::string& activations_dir,
                                 const std::vector<std::vector<ActivationSample>>& samples);

// Produces the sample's tensors in the plan's dtype; dumps are checked against the role's heads
// and head size and may carry their own sequence lengths.
Result<QkvTensors> materialize(const WorkloadPlan& plan, const RolePlan& role, const ActivationSample& sample,
                               std::uint64_t seed);

}  // namespace diffattn::runner
