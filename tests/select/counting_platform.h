#pragma once
// A Platform that records every consultation, so tests can prove what the selector caches.

#include <cctype>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "diffattn/platform.h"

namespace diffattn::testing {

class CountingPlatform final : public Platform {
 public:
  using Call = std::tuple<std::optional<std::string>, int, bool>;

  explicit CountingPlatform(std::string default_backend = "TORCH_SDPA") : default_(std::move(default_backend)) {
    info_.kind = PlatformKind::kCpu;
    info_.device_name = "counting";
  }

  const PlatformInfo& info() const override { return info_; }

  Result<PlatformDecision> select_backend(std::optional<std::string_view> selected, int head_size,
                                          const LayerTraits& traits) const override {
    std::lock_guard lock(mu_);
    calls_.emplace_back(selected ? std::optional<std::string>(std::string(*selected)) : std::nullopt, head_size,
                        traits.allows_trtllm_default);
    if (!selected) return PlatformDecision{default_, {{"FLASH_ATTN", "not on this test platform"}}};
    std::string name(*selected);
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (name == "REJECTED_ATTN") return Unsupported("REJECTED_ATTN cannot run on the counting platform");
    return PlatformDecision{name, {}};
  }

  std::vector<Call> calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }

 private:
  PlatformInfo info_;
  std::string default_;
  mutable std::mutex mu_;
  mutable std::vector<Call> calls_;
};

}  // namespace diffattn::testing
