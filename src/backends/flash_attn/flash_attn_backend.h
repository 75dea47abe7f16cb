#pragma once
// FLASH_ATTN: diffattn's own FlashAttention kernels for CUDA views (Hopper wgmma + TMA on sm_90,
// mma.sync on sm_80..sm_89).

#include <string_view>
#include <utility>

#include "diffattn/backend.h"

namespace diffattn {

class FlashAttnBackend final : public Backend {
 public:
  explicit FlashAttnBackend(BackendInit init) : init_(std::move(init)) {}
  std::string_view name() const override { return "FLASH_ATTN"; }
  // The problem's scale wins over the layer's; causal applies when either the layer or the call
  // asks for it. Validates before touching memory.
  Status forward(const AttentionProblem& problem, void* stream) override;

 private:
  BackendInit init_;
};

}  // namespace diffattn
