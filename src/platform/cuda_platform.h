#pragma once
// CUDA policy (docs/design/selection_contract.md): explicit selections are validated against the backend's declared
// requirements and fail with an actionable error, never a silent swap; defaults follow the
// per-architecture routes (routes.cc) and record every candidate passed over.

#include <string>
#include <utility>

#include "diffattn/platform.h"
#include "diffattn/registry.h"
#include "platform/cuda_facts.h"

namespace diffattn {

class CudaPlatform final : public Platform {
 public:
  CudaPlatform(PlatformInfo info, const Registry& registry)
      : info_(std::move(info)), registry_(registry), facts_(cuda_facts(info_)) {}

  const PlatformInfo& info() const override { return info_; }
  Result<PlatformDecision> select_backend(std::optional<std::string_view> selected, int head_size,
                                          const LayerTraits& traits) const override;

 private:
  Result<PlatformDecision> validate_explicit(const std::string& name, int head_size) const;
  Result<PlatformDecision> choose_default(int head_size, const LayerTraits& traits) const;

  PlatformInfo info_;
  const Registry& registry_;
  CudaFacts facts_;
};

}  // namespace diffattn
