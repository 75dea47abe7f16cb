#include "backends/rainfusion_attn/rainfusion_backend.h"

#include <cstdio>
#include <string>
#include <vector>

#include "common/strings.h"
#include "diffattn/log.h"
#include "kernels/cpu/rainfusion_cpu.h"
#include "kernels/cpu/sdpa_cpu.h"
#include "kernels/cuda/flash/run_flash_attn.h"
#include "kernels/cuda/sparse/rainfusion_cuda.h"
#include "registry/option_checks.h"

namespace diffattn {
namespace {

std::string fixed(double value, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

std::string plan_summary(const RainFusionPlan& plan) {
  int counts[3] = {0, 0, 0};
  for (RainPattern p : plan.patterns) ++counts[static_cast<int>(p)];
  std::string heads;
  for (int i = 0; i < 3; ++i)
    heads += (i ? ", " : "") + std::to_string(counts[i]) + " " + std::string(rain_pattern_name(kRainPatterns[i]));
  return "video density " + fixed(plan.video_density, 3) + ", density with text " + fixed(plan.density, 3) + " over " +
         std::to_string(plan.tiles.count()) + " tiles; heads: " + heads;
}

}  // namespace

Capabilities rainfusion_attn_capabilities() {
  Capabilities caps;
  caps.devices = {DeviceKind::kCpu, DeviceKind::kCuda};
  caps.dtypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
  caps.head_sizes = {64, 96, 128, 192, 256};
  caps.gqa = true;
  caps.causal = false;
  caps.key_padding_mask = false;
  caps.dense_mask = false;
  caps.lse = false;
  caps.cross = false;
  caps.needs_video_geometry = true;
  caps.option_blocks = {"block_sparse"};
  return caps;
}

Result<std::optional<std::string>> rainfusion_dense_reason(const BlockSparseSpec& o,
                                                           const std::optional<DenoisingStep>& step) {
  if (o.sparsity == 0.0) return std::optional<std::string>("block_sparse.sparsity is 0");
  if (!o.skip_layer_indices.empty()) {
    if (!step || !step->layer)
      return InvalidInput("RAINFUSION_ATTN: block_sparse.skip_layers needs each call's layer index; set "
                          "AttentionProblem::denoising.layer, or drop skip_layers");
    if (o.skip_layer_indices.count(*step->layer))
      return std::optional<std::string>("layer " + std::to_string(*step->layer) + " is in block_sparse.skip_layers");
  }
  if (o.start_step > 0) {
    if (!step)
      return InvalidInput("RAINFUSION_ATTN: block_sparse.start_step " + std::to_string(o.start_step) +
                          " needs each call's denoising step; set AttentionProblem::denoising.index, or set "
                          "start_step to 0");
    if (step->index < o.start_step)
      return std::optional<std::string>("step " + std::to_string(step->index) + " < block_sparse.start_step " +
                                        std::to_string(o.start_step));
  }
  if (o.end_step > 0) {
    if (!step || step->num_steps <= 0)
      return InvalidInput("RAINFUSION_ATTN: block_sparse.end_step " + std::to_string(o.end_step) +
                          " counts the last steps of a generation, so each call must say its step and the number "
                          "of steps; set AttentionProblem::denoising.index and num_steps, or set end_step to 0");
    if (step->index >= step->num_steps - o.end_step)
      return std::optional<std::string>("step " + std::to_string(step->index) + " is one of the last " +
                                        std::to_string(o.end_step) + " of " + std::to_string(step->num_steps));
  }
  return std::optional<std::string>();
}

// The layer checked the call's shapes, its geometry's token count and the capabilities; `stream`
// is the layer's cudaStream_t for CUDA views.
Status RainfusionAttnBackend::forward(const AttentionProblem& problem, void* stream) {
  const bool on_gpu = problem.q.device.kind == DeviceKind::kCuda;
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<std::string> dense, rainfusion_dense_reason(options_, problem.denoising));
  if (dense) return on_gpu ? flash::run_flash_attn_cuda(problem, stream) : run_sdpa_cpu(problem);
  RainFusionParams params;
  params.sparsity = options_.sparsity;
  params.precision = options_.precision == "fp8"   ? RainPrecision::kFp8
                     : options_.precision == "mix" ? RainPrecision::kMix
                                                   : RainPrecision::kBf16;
  const std::int64_t layer = problem.denoising && problem.denoising->layer ? *problem.denoising->layer : -1;
  const std::int64_t step = problem.denoising ? problem.denoising->index : -1;
  // The plan is read back only for the call that logs it: on the GPU that read waits for the stream.
  bool log_plan = false;
  {
    std::lock_guard lock(logged_mu_);
    log_plan = !logged_.count({layer, step});
  }
  RainFusionPlan plan;
  RainFusionPlan* wanted = log_plan ? &plan : nullptr;
  DIFFATTN_RETURN_IF_ERROR(on_gpu ? run_rainfusion_cuda(problem, params, stream, wanted)
                                  : run_rainfusion_cpu(problem, params, wanted));
  if (!log_plan) return Status::Ok();
  std::lock_guard lock(logged_mu_);
  if (logged_.emplace(layer, step).second)
    log_info("RAINFUSION_ATTN role='" + role_ + "' layer " + std::to_string(layer) + " step " + std::to_string(step) +
             " at sparsity " + fixed(options_.sparsity, 3) + ", precision " + options_.precision + ": " +
             plan_summary(plan));
  return Status::Ok();
}

Status validate_rainfusion_attn_options(const AttentionSpec& spec) {
  if (spec.block_sparse) {
    const BlockSparseSpec& b = *spec.block_sparse;
    if (b.precision != "bf16" && b.precision != "fp8" && b.precision != "mix")
      return InvalidConfig("RAINFUSION_ATTN: block_sparse.precision must be one of ['bf16', 'fp8', 'mix']; got '" +
                           b.precision + "'");
    if (!(b.sparsity >= 0.0 && b.sparsity <= 1.0) || b.start_step < 0 || b.end_step < 0)
      return InvalidConfig("RAINFUSION_ATTN: block_sparse.sparsity must be in [0, 1] and start_step, end_step >= 0; "
                           "got sparsity " + std::to_string(b.sparsity) + ", start_step " + std::to_string(b.start_step) +
                           ", end_step " + std::to_string(b.end_step));
  }
  return check_extra_keys(spec, "RAINFUSION_ATTN", {});
}

// Configuration fills the block_sparse defaults (sparsity 0.8) for RAINFUSION_ATTN; a spec built
// in code without the block gets the same. Without any spec (never through configuration: a
// direct registry call, as the parity harness makes) nothing is dropped: sparsity 0.
Result<std::unique_ptr<Backend>> create_rainfusion_attn_backend(const BackendInit& init) {
  BlockSparseSpec options;
  if (init.spec) {
    DIFFATTN_RETURN_IF_ERROR(validate_rainfusion_attn_options(*init.spec));
    if (init.spec->block_sparse) options = *init.spec->block_sparse;
  } else {
    options.sparsity = 0.0;
  }
  return std::unique_ptr<Backend>(std::make_unique<RainfusionAttnBackend>(std::move(options), init.role));
}

}  // namespace diffattn
