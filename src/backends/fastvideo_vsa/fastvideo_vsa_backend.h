#pragma once
// FASTVIDEO_VSA: FastVideo's video sparse attention (coarse attention over 4x4x4 cubes picks each
// query cube's top-k key cubes; fine block-sparse attention over those): the CPU implementation
// for CPU views, the CUDA path (sm_80 to sm_90, float16 and bfloat16) for CUDA views.

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "diffattn/backend.h"
#include "diffattn/registry.h"

namespace diffattn {

// The one declaration of what FASTVIDEO_VSA runs: the descriptor publishes it and the attention
// layer holds every call to it.
Capabilities fastvideo_vsa_capabilities();

class FastvideoVsaBackend final : public Backend {
 public:
  // `topk`: fastvideo_vsa_topk; nullopt keeps every cube (FastVideo's default sparsity 0).
  explicit FastvideoVsaBackend(std::optional<std::int64_t> topk) : topk_(topk) {}
  std::string_view name() const override { return "FASTVIDEO_VSA"; }
  Status forward(const AttentionProblem& problem, void* stream) override;

 private:
  std::optional<std::int64_t> topk_;
};

Result<std::unique_ptr<Backend>> create_fastvideo_vsa_backend(const BackendInit& init);
Status validate_fastvideo_vsa_options(const AttentionSpec& spec);

}  // namespace diffattn
