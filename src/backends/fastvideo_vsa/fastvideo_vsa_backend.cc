#include "backends/fastvideo_vsa/fastvideo_vsa_backend.h"

#include <string>

#include "kernels/cpu/vsa_cpu.h"
#include "kernels/cuda/sparse/vsa_cuda.h"
#include "kernels/cuda/sparse/vsa_cuda_config.h"
#include "kernels/sparse/vsa_cube_map.h"
#include "registry/option_checks.h"

namespace diffattn {

Capabilities fastvideo_vsa_capabilities() {
  Capabilities caps;
  caps.devices = {DeviceKind::kCpu, DeviceKind::kCuda};
  caps.dtypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
  // FastVideo's head sizes, which the CUDA path compiles; the CPU path keeps to them too.
  caps.head_sizes = {vsa::kCudaHeadSizes.begin(), vsa::kCudaHeadSizes.end()};
  caps.gqa = true;
  caps.causal = false;
  caps.key_padding_mask = false;
  caps.dense_mask = false;
  caps.lse = false;  // the output mixes two softmaxes (fine + gated coarse): no one log-sum-exp
  caps.cross = false;
  caps.needs_video_geometry = true;
  caps.gate = true;
  caps.option_blocks = {"fastvideo_vsa_topk"};
  return caps;
}

// The layer checked the call's shapes, its geometry's token count and the capabilities; `stream`
// is the layer's cudaStream_t for CUDA views.
Status FastvideoVsaBackend::forward(const AttentionProblem& problem, void* stream) {
  const std::int64_t cubes =
      problem.video ? VsaCubeMap{problem.video->frames, problem.video->height, problem.video->width}.cubes() : 0;
  const std::int64_t topk = topk_.value_or(cubes);
  if (problem.q.device.kind == DeviceKind::kCuda) return run_fastvideo_vsa_cuda(problem, topk, stream);
  return run_fastvideo_vsa_cpu(problem, topk);
}

Status validate_fastvideo_vsa_options(const AttentionSpec& spec) {
  if (spec.fastvideo_vsa_topk && *spec.fastvideo_vsa_topk <= 0)
    return InvalidConfig("FASTVIDEO_VSA: fastvideo_vsa_topk must be positive (the key cubes each query cube keeps), "
                         "got " + std::to_string(*spec.fastvideo_vsa_topk) + "; omit it to keep every cube");
  return check_extra_keys(spec, "FASTVIDEO_VSA", {});
}

Result<std::unique_ptr<Backend>> create_fastvideo_vsa_backend(const BackendInit& init) {
  std::optional<std::int64_t> topk;
  if (init.spec) {
    DIFFATTN_RETURN_IF_ERROR(validate_fastvideo_vsa_options(*init.spec));
    topk = init.spec->fastvideo_vsa_topk;
  }
  return std::unique_ptr<Backend>(std::make_unique<FastvideoVsaBackend>(topk));
}

}  // namespace diffattn
