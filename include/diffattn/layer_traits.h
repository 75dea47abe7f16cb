#pragma once
// What a model's attention layer promises about its calls: the contract that some backends need
// before the platform may choose them automatically.

#include <compare>

namespace diffattn {

struct LayerTraits {
  // The layer's calls are mask-free and packed: TRTLLM_ATTN's automatic contract (docs/design/selection_contract.md).
  bool allows_trtllm_default = false;

  // Every contract a layer can promise, for callers that have no model to ask.
  static constexpr LayerTraits Unconstrained() { return LayerTraits{.allows_trtllm_default = true}; }
  auto operator<=>(const LayerTraits&) const = default;
};

}  // namespace diffattn
