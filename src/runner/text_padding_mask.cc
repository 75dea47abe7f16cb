#include "runner/text_padding_mask.h"

#include <algorithm>
#include <string>

namespace diffattn::runner {

Result<TextKeys> text_keys_of(const ModelSpec& model, const ModelRole& role) {
  if (role.key_tokens == "text") return TextKeys::kAll;
  if (role.key_tokens != "joint") return TextKeys::kNone;
  if (model.joint_text == "first") return TextKeys::kFirst;
  if (model.joint_text == "last") return TextKeys::kLast;
  return InvalidConfig("model '" + model.name + "' role '" + role.role +
                       "' joins text to its keys, but its zoo entry does not say where (joint_text \"first\" or "
                       "\"last\"); add it to models/zoo.json or run without --prompt-tokens");
}

std::vector<std::uint8_t> text_keep_row(std::int64_t keys, TextKeys where, std::int64_t text_tokens,
                                        std::int64_t prompt_tokens) {
  std::vector<std::uint8_t> row(static_cast<std::size_t>(keys), 1);
  if (where == TextKeys::kNone) return row;
  const std::int64_t text_begin = where == TextKeys::kLast ? keys - text_tokens : 0;
  const std::int64_t text_end = where == TextKeys::kAll ? keys : text_begin + text_tokens;
  const std::int64_t kept_end = std::min(text_end, text_begin + prompt_tokens);
  std::fill(row.begin() + kept_end, row.begin() + text_end, 0);
  return row;
}

TensorView KeyPaddingMask::view() const {
  return TensorView::Contiguous(const_cast<std::uint8_t*>(keep.data()), DType::kBool, {batch, keys});
}

Result<std::optional<KeyPaddingMask>> text_padding_mask(const WorkloadPlan& plan, const RolePlan& role,
                                                        std::int64_t batch, std::int64_t keys) {
  if (!role.text_keys_masked || !plan.prompt_tokens) return std::optional<KeyPaddingMask>();
  DIFFATTN_ASSIGN_OR_RETURN(TextKeys where, text_keys_of(*plan.model, role.role));
  if (where == TextKeys::kNone) return std::optional<KeyPaddingMask>();
  const std::int64_t text = where == TextKeys::kAll ? keys : plan.model->text_tokens;
  const std::int64_t prompt = *plan.prompt_tokens;
  if (text > keys || (where != TextKeys::kAll && text == keys))
    return InvalidInput("role '" + role.role.role + "' has " + std::to_string(keys) + " keys, too few to hold " +
                        std::to_string(text) + " text tokens and the video; check the dumps or run without "
                        "--prompt-tokens");
  if (prompt > text)
    return InvalidInput("--prompt-tokens " + std::to_string(prompt) + " exceeds the " + std::to_string(text) +
                        " text keys of role '" + role.role.role + "' in this sample; give at most " +
                        std::to_string(text));
  const std::vector<std::uint8_t> row = text_keep_row(keys, where, text, prompt);
  KeyPaddingMask mask;
  mask.batch = batch;
  mask.keys = keys;
  mask.keep.reserve(static_cast<std::size_t>(batch * keys));
  for (std::int64_t b = 0; b < batch; ++b) mask.keep.insert(mask.keep.end(), row.begin(), row.end());
  return std::optional<KeyPaddingMask>(std::move(mask));
}

std::string text_mask_summary(const WorkloadPlan& plan) {
  if (!plan.prompt_tokens) return "";
  std::string line = "prompt: " + std::to_string(*plan.prompt_tokens) + " of " +
                     std::to_string(plan.model->text_tokens) + " text tokens; ";
  std::string roles;
  for (const RolePlan& r : plan.roles)
    if (r.text_keys_masked) roles += (roles.empty() ? "" : ", ") + r.role.role;
  if (roles.empty()) return line + "no text key is padding, so no role is masked";
  return line + "padded text keys masked (bool key-padding mask) on roles: " + roles;
}

}  // namespace diffattn::runner
