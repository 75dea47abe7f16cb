#include "diffattn/selector.h"

namespace diffattn {

std::string_view source_name(ResolutionSource source) {
  switch (source) {
    case ResolutionSource::kPerRole: return "per_role";
    case ResolutionSource::kCategory: return "category";
    case ResolutionSource::kDefault: return "default";
    case ResolutionSource::kEnv: return "env";
    case ResolutionSource::kPlatform: return "platform";
  }
  return "platform";
}

nlohmann::json resolution_to_json(const Resolution& resolution) {
  nlohmann::json considered = nlohmann::json::array();
  for (const Considered& c : resolution.considered) considered.push_back({{"backend", c.backend}, {"reason", c.reason}});
  nlohmann::json out = {
      {"role", resolution.role},
      {"category", resolution.category ? nlohmann::json(*resolution.category) : nlohmann::json(nullptr)},
      {"head_size", resolution.head_size},
      {"backend", resolution.backend},
      {"source", source_name(resolution.source)},
      {"spec", resolution.spec ? spec_to_json(*resolution.spec) : nlohmann::json(nullptr)},
      {"considered", considered}};
  if (resolution.profile) out["profile"] = *resolution.profile;
  return out;
}

}  // namespace diffattn
