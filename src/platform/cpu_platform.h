#pragma once
// CPU policy: the CPU route's default (routes.cc); explicit names are validated against the registry and
// backends without CPU kernels are rejected by name.

#include <utility>

#include "diffattn/platform.h"
#include "diffattn/registry.h"

namespace diffattn {

class CpuPlatform final : public Platform {
 public:
  CpuPlatform(PlatformInfo info, const Registry& registry) : info_(std::move(info)), registry_(registry) {}

  const PlatformInfo& info() const override { return info_; }
  Result<PlatformDecision> select_backend(std::optional<std::string_view> selected, int head_size,
                                          const LayerTraits& traits) const override;

 private:
  Result<PlatformDecision> validate_explicit(const std::string& name, int head_size) const;
  Result<PlatformDecision> choose_default(int head_size) const;

  PlatformInfo info_;
  const Registry& registry_;
};

}  // namespace diffattn
