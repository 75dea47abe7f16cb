// Reads the models/zoo.json format into ModelSpec values, with errors that name the model and field.
#include <nlohmann/json.hpp>

#include <set>
#include <string>

#include "common/json_duplicates.h"
#include "models/model_zoo.h"

namespace diffattn {
namespace {

using nlohmann::json;

Status field_error(const std::string& model, const std::string& field, const std::string& what) {
  return InvalidConfig("model zoo: model '" + model + "' field '" + field + "' " + what +
                       "; fix models/zoo.json (see its token_rule and the other entries)");
}

Result<int> positive_int(const json& obj, const std::string& model, const std::string& field) {
  if (!obj.contains(field)) return field_error(model, field, "is missing");
  const json& v = obj.at(field);
  if (!v.is_number_integer() || v.get<long long>() <= 0)
    return field_error(model, field, "must be a positive integer, got " + v.dump());
  return v.get<int>();
}

bool is_token_source(const std::string& s) {
  static const std::set<std::string> kSources = {"video", "text", "audio", "joint"};
  return kSources.count(s) > 0;
}

Result<ModelRole> parse_role(const json& r, const std::string& model) {
  ModelRole role;
  if (!r.is_object() || !r.contains("role") || !r.at("role").is_string())
    return field_error(model, "roles[].role", "must be a string");
  role.role = r.at("role").get<std::string>();
  const std::string where = model + "/" + role.role;
  if (r.contains("category")) role.category = r.at("category").get<std::string>();
  DIFFATTN_ASSIGN_OR_RETURN(role.num_heads, positive_int(r, where, "heads"));
  DIFFATTN_ASSIGN_OR_RETURN(role.num_kv_heads, positive_int(r, where, "kv_heads"));
  DIFFATTN_ASSIGN_OR_RETURN(role.head_size, positive_int(r, where, "head_size"));
  DIFFATTN_ASSIGN_OR_RETURN(role.layers, positive_int(r, where, "layers"));
  if (role.num_heads % role.num_kv_heads != 0)
    return field_error(where, "kv_heads", "must divide heads (" + std::to_string(role.num_heads) + ")");
  role.query_tokens = r.value("query", "video");
  role.key_tokens = r.value("key", "video");
  if (!is_token_source(role.query_tokens) || !is_token_source(role.key_tokens))
    return field_error(where, "query/key", "must be one of video, text, audio, joint");
  role.causal = r.value("causal", false);
  return role;
}

Result<ModelSpec> parse_model(const json& m) {
  ModelSpec spec;
  if (!m.is_object() || !m.contains("name") || !m.at("name").is_string())
    return InvalidConfig("model zoo: every model needs a string 'name'; fix models/zoo.json");
  spec.name = m.at("name").get<std::string>();
  spec.display_name = m.value("display_name", spec.name);
  spec.source = m.value("source", "");
  spec.notes = m.value("notes", "");
  spec.attention_mask_free = m.value("attention_mask_free", false);
  spec.hidden_size = m.value("hidden_size", 0);
  spec.text_tokens = m.value("text_tokens", 0);
  spec.joint_text = m.value("joint_text", "");
  if (!spec.joint_text.empty() && spec.joint_text != "first" && spec.joint_text != "last")
    return field_error(spec.name, "joint_text", "must be \"first\" or \"last\", got \"" + spec.joint_text + "\"");
  spec.frame_rate = m.value("frame_rate", 0.0);
  spec.audio_tokens_per_second = m.value("audio_tokens_per_second", 0.0);
  if (!m.contains("vae") || !m.contains("patch") || !m.contains("defaults"))
    return field_error(spec.name, "vae/patch/defaults", "are required");
  DIFFATTN_ASSIGN_OR_RETURN(spec.vae_temporal_compression, positive_int(m.at("vae"), spec.name, "temporal"));
  DIFFATTN_ASSIGN_OR_RETURN(spec.vae_spatial_compression, positive_int(m.at("vae"), spec.name, "spatial"));
  const json& patch = m.at("patch");
  if (!patch.is_array() || patch.size() != 3)
    return field_error(spec.name, "patch", "must be [t, h, w]");
  spec.patch_t = patch[0].get<int>();
  spec.patch_h = patch[1].get<int>();
  spec.patch_w = patch[2].get<int>();
  if (spec.patch_t <= 0 || spec.patch_h <= 0 || spec.patch_w <= 0)
    return field_error(spec.name, "patch", "entries must be positive");
  const json& d = m.at("defaults");
  DIFFATTN_ASSIGN_OR_RETURN(spec.default_height, positive_int(d, spec.name, "height"));
  DIFFATTN_ASSIGN_OR_RETURN(spec.default_width, positive_int(d, spec.name, "width"));
  DIFFATTN_ASSIGN_OR_RETURN(spec.default_frames, positive_int(d, spec.name, "frames"));
  DIFFATTN_ASSIGN_OR_RETURN(spec.default_steps, positive_int(d, spec.name, "steps"));
  if (!m.contains("roles") || !m.at("roles").is_array() || m.at("roles").empty())
    return field_error(spec.name, "roles", "must be a non-empty list");
  for (const json& r : m.at("roles")) {
    DIFFATTN_ASSIGN_OR_RETURN(ModelRole role, parse_role(r, spec.name));
    spec.roles.push_back(std::move(role));
  }
  spec.audio_tokens = static_cast<int>(audio_tokens(spec, spec.default_frames));
  return spec;
}

}  // namespace

Result<std::vector<ModelSpec>> parse_model_zoo(std::string_view json_text) {
  std::string duplicate;
  json doc = parse_json_noting_duplicates(json_text, duplicate, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("models") || !doc.at("models").is_array())
    return InvalidConfig("model zoo: the document is not a JSON object with a 'models' list; "
                         "fix models/zoo.json");
  if (!duplicate.empty())
    return InvalidConfig("model zoo: the key '" + duplicate + "' appears twice in one object; keep one in models/zoo.json");
  std::vector<ModelSpec> models;
  std::set<std::string> seen;
  for (const json& m : doc.at("models")) {
    // Type mismatches inside nlohmann's get<> throw; keep them inside this boundary.
    try {
      DIFFATTN_ASSIGN_OR_RETURN(ModelSpec spec, parse_model(m));
      if (!seen.insert(spec.name).second)
        return InvalidConfig("model zoo: model '" + spec.name + "' appears twice; keep one entry");
      models.push_back(std::move(spec));
    } catch (const json::exception& e) {
      return InvalidConfig(std::string("model zoo: a field has the wrong type (") + e.what() +
                           "); fix models/zoo.json");
    }
  }
  return models;
}

}  // namespace diffattn
