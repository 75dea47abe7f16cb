#pragma once
// TORCH_SDPA: exact scaled-dot-product attention with PyTorch SDPA semantics, on the CPU kernel
// for CPU views and on run_sdpa_cuda for CUDA views.

#include <string_view>
#include <utility>

#include "diffattn/backend.h"

namespace diffattn {

class TorchSdpaBackend final : public Backend {
 public:
  explicit TorchSdpaBackend(BackendInit init) : init_(std::move(init)) {}
  std::string_view name() const override { return "TORCH_SDPA"; }
  // The problem's scale wins over the layer's; causal applies when either the layer or the call
  // asks for it. Validates before touching memory.
  Status forward(const AttentionProblem& problem, void* stream) override;

 private:
  BackendInit init_;
};

}  // namespace diffattn
