// Printing configurations as JSON that config_from_json reads back to an equal value.

#include "config/typed_blocks.h"
#include "diffattn/config.h"

namespace diffattn {

nlohmann::json spec_to_json(const AttentionSpec& spec) {
  nlohmann::json out = nlohmann::json::object();
  out["backend"] = spec.backend;
  if (spec.quant) out["quant"] = config_detail::quant_to_json(*spec.quant);
  if (spec.skip_softmax) out["skip_softmax"] = config_detail::skip_softmax_to_json(*spec.skip_softmax);
  if (spec.block_sparse) out["block_sparse"] = config_detail::block_sparse_to_json(*spec.block_sparse);
  if (spec.fastvideo_vsa_topk) out["fastvideo_vsa_topk"] = *spec.fastvideo_vsa_topk;
  if (!spec.extra.empty()) out["extra"] = spec.extra;
  return out;
}

nlohmann::json config_to_json(const AttentionConfig& config) {
  nlohmann::json out = nlohmann::json::object();
  out["default"] = config.default_spec ? spec_to_json(*config.default_spec) : nlohmann::json(nullptr);
  // Roles print flat ("ltx2.audio_self"); a dotted key reads back as the same role.
  nlohmann::json per_role = nlohmann::json::object();
  for (const auto& [role, spec] : config.per_role) per_role[role] = spec_to_json(spec);
  out["per_role"] = std::move(per_role);
  return out;
}

}  // namespace diffattn
