#pragma once
// The key-padding mask a pipeline passes when it pads its prompt: every non-text key and the first
// N text keys are kept, the padded text keys after them are dropped.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "diffattn/status.h"
#include "diffattn/tensor.h"
#include "models/model_zoo.h"
#include "runner/workload_plan.h"

namespace diffattn::runner {

// Where a role's text keys sit among its keys.
enum class TextKeys {
  kNone,   // no text among the keys (self, audio)
  kAll,    // every key is text (cross-attention)
  kFirst,  // joint sequence [text; video]
  kLast,   // joint sequence [video; text]
};

// Where the text keys of `role` sit; a joint role of a model whose zoo entry lacks joint_text is an error.
Result<TextKeys> text_keys_of(const ModelSpec& model, const ModelRole& role);

// One row of keep flags (1 keeps) over `keys` keys, of which `text_tokens` are text placed as
// `where` says; the first `prompt_tokens` text keys are kept, the rest of the text is dropped.
std::vector<std::uint8_t> text_keep_row(std::int64_t keys, TextKeys where, std::int64_t text_tokens,
                                        std::int64_t prompt_tokens);

// A bool key-padding mask [batch, keys] in host memory.
struct KeyPaddingMask {
  std::int64_t batch = 0, keys = 0;
  std::vector<std::uint8_t> keep;  // row-major [batch, keys], 1 keeps the key

  TensorView view() const;  // a CPU bool view over `keep`; backends only read it
};

// The mask for one sample of `role` with `keys` keys (cross roles: every key is text; joint roles:
// the model's text_tokens of them), or nullopt when the plan masks nothing for this role.
Result<std::optional<KeyPaddingMask>> text_padding_mask(const WorkloadPlan& plan, const RolePlan& role,
                                                        std::int64_t batch, std::int64_t keys);

// One line for report headers: "prompt: 20 of 64 text tokens; padded text keys masked on roles: cross";
// empty when the run was not given --prompt-tokens.
std::string text_mask_summary(const WorkloadPlan& plan);

}  // namespace diffattn::runner
