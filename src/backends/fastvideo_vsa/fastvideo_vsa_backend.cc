#include "backends/fastvideo_vsa/fastvideo_vsa_backend.h"

#include <string>

#include "kernels/cpu/vsa_cpu.h"
#include "kernels/sparse/vsa_cubes.h"
#include "registry/option_checks.h"

namespace diffattn {

Capabilities fastvideo_vsa_capabilities() {
  Capabilities caps;
  caps.devices = {DeviceKind::kCpu, DeviceKind::kCuda};
  caps.dtypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
  caps.head_sizes = {64, 128};  // FastVideo's, and the tiles its GPU kernels are written for
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

// The layer checked the call's shapes, its geometry's token count and the capabilities.
Status FastvideoVsaBackend::forward(const AttentionProblem& problem, void*) {
  if (problem.q.device.kind == DeviceKind::kCuda)
    return Unavailable("FASTVIDEO_VSA's CUDA kernels are not part of this diffattn build yet. Run it on CPU tensors, "
                       "or select FLASH_ATTN or TORCH_SDPA instead.");
  const VsaCubes cubes = tile_video_into_cubes(*problem.video);
  const std::int64_t topk = topk_.value_or(cubes.count());
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
