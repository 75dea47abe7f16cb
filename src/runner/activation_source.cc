#include "runner/activation_source.h"

#include <filesystem>

#include "runner/activation_dumps.h"

namespace diffattn::runner {

namespace fs = std::filesystem;

Result<std::vector<ActivationSample>> role_samples(const WorkloadPlan& plan, const RolePlan& role,
                                                   const std::string& activations_dir) {
  std::vector<ActivationSample> samples;
  if (!activations_dir.empty()) {
    DIFFATTN_ASSIGN_OR_RETURN(std::vector<std::string> dirs, find_role_dumps(activations_dir, role.role.role));
    for (const std::string& d : dirs) {
      ActivationSample s;
      s.dump_dir = d;
      s.label = fs::path(d).lexically_relative(activations_dir).string();
      samples.push_back(std::move(s));
    }
    if (!samples.empty()) return samples;
  }
  for (int layer : role.layers) {
    for (int step : plan.sampled_steps) {
      ActivationSample s;
      s.layer = layer;
      s.step = step;
      s.label = "layer " + std::to_string(layer) + " step " + std::to_string(step);
      samples.push_back(std::move(s));
    }
  }
  return samples;
}

Status check_some_role_has_dumps(const WorkloadPlan& plan, const std::string& activations_dir,
                                 const std::vector<std::vector<ActivationSample>>& samples) {
  if (activations_dir.empty()) return Status::Ok();
  std::string roles;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (!samples[i].empty() && !samples[i].front().dump_dir.empty()) return Status::Ok();
    roles += (roles.empty() ? "" : ", ") + plan.roles[i].role.role;
  }
  return InvalidInput("--activations " + activations_dir + " holds no dump for any role of " + plan.model->name + " (" +
                      roles + "); add DIR/<role>/q.npy, k.npy, v.npy or DIR/<role>/qkv.safetensors, or run without "
                      "--activations");
}

Result<QkvTensors> materialize(const WorkloadPlan& plan, const RolePlan& role, const ActivationSample& sample,
                               std::uint64_t seed) {
  if (!sample.dump_dir.empty()) return load_qkv_dump(sample.dump_dir, role.role, plan.dtype);
  const ModelRole& r = role.role;
  QkvTensors t{HostTensor(plan.dtype, {plan.batch, role.seqlen_q, r.num_heads, r.head_size}),
               HostTensor(plan.dtype, {plan.batch, role.seqlen_kv, r.num_kv_heads, r.head_size}),
               HostTensor(plan.dtype, {plan.batch, role.seqlen_kv, r.num_kv_heads, r.head_size})};
  ActivationKey key{seed, plan.model->name, r.role, sample.layer, sample.step, plan.steps, role.video};
  generate_activations(key, ActivationStats{}, t.q, t.k, t.v);
  return t;
}

}  // namespace diffattn::runner
