// AttentionConfig from one JSON object: top-level keys, the default spec, and per_role maps whose
// nested objects flatten to dotted roles ({"ltx2": {"audio_self": {...}}} -> "ltx2.audio_self").

#include <array>
#include <set>
#include <string>

#include "config/json_values.h"
#include "diffattn/config.h"

namespace diffattn {
namespace {

using config_detail::field_error;
using nlohmann::json;

constexpr std::array<std::string_view, 2> kConfigKeys = {"default", "per_role"};
constexpr std::array<std::string_view, 6> kSpecKeys = {"backend",            "block_sparse", "extra",
                                                       "fastvideo_vsa_topk", "quant",        "skip_softmax"};

bool is_spec_key(std::string_view key) {
  for (std::string_view k : kSpecKeys) {
    if (k == key) return true;
  }
  return false;
}

std::string role_field(std::string_view role) { return "per_role[" + config_detail::repr(role) + "]"; }

// A node is a leaf spec when any of its keys is a spec key; then all of them must be.
Result<bool> is_leaf_spec(const json& node, std::string_view role) {
  bool any_spec_key = false;
  std::string role_keys;
  for (const auto& item : node.items()) {
    if (is_spec_key(item.key())) {
      any_spec_key = true;
    } else {
      role_keys += (role_keys.empty() ? "" : ", ") + config_detail::repr(item.key());
    }
  }
  if (any_spec_key && !role_keys.empty()) {
    return InvalidConfig("Invalid per_role entry for role " + config_detail::repr(role) +
                           ": cannot mix spec keys (backend, quant, skip_softmax, block_sparse, fastvideo_vsa_topk, "
                           "extra) with nested role keys (" + role_keys +
                           "). Move the nested roles into their own entries.");
  }
  return any_spec_key;
}

class RoleFlattener {
 public:
  RoleFlattener(std::map<std::string, AttentionSpec>& out, const Registry& registry) : out_(out), registry_(registry) {}

  Status flatten(const json& node, const std::string& prefix, int depth) {
    if (depth > config_detail::kMaxJsonDepth) {
      return field_error("per_role", "roles nest deeper than " + std::to_string(config_detail::kMaxJsonDepth) +
                                         " levels under " + config_detail::repr(prefix) + ".");
    }
    for (const auto& item : node.items()) {
      if (item.key().empty()) {
        return field_error("per_role", "a role name is empty" +
                                           (prefix.empty() ? std::string() : " under " + config_detail::repr(prefix)) +
                                           "; name every role, e.g. \"cross\" or \"ltx2.audio_to_video\".");
      }
      DIFFATTN_RETURN_IF_ERROR(config_detail::check_utf8(item.key(), "per_role", "a role name"));
      const std::string role = prefix.empty() ? item.key() : prefix + "." + item.key();
      DIFFATTN_RETURN_IF_ERROR(visit(item.value(), role, depth));
    }
    return Status::Ok();
  }

 private:
  Status visit(const json& child, const std::string& role, int depth) {
    if (child.is_object()) {
      if (child.empty()) {
        return InvalidConfig("Empty per_role entry for role " + config_detail::repr(role) +
                             "; give it a backend, e.g. {\"backend\": \"FLASH_ATTN\"}, or remove it.");
      }
      DIFFATTN_ASSIGN_OR_RETURN(bool leaf, is_leaf_spec(child, role));
      if (!leaf) return flatten(child, role, depth + 1);
    }
    return add_leaf(child, role);
  }

  Status add_leaf(const json& value, const std::string& role) {
    if (!seen_.insert(role).second) {
      return field_error(role_field(role), "role " + config_detail::repr(role) +
                                               " is given twice (once as a dotted key and once nested); keep one.");
    }
    DIFFATTN_ASSIGN_OR_RETURN(std::optional<AttentionSpec> spec, spec_from_json(value, role_field(role), registry_));
    if (spec) out_.emplace(role, std::move(*spec));
    return Status::Ok();
  }

  std::map<std::string, AttentionSpec>& out_;
  const Registry& registry_;
  std::set<std::string> seen_;
};

}  // namespace

Result<AttentionConfig> config_from_json(const json& value, const Registry& registry) {
  AttentionConfig config;
  if (value.is_null()) return config;
  if (!value.is_object()) {
    return InvalidConfig("the attention config must be a JSON object with keys default and per_role; got " +
                         std::string(config_detail::json_type_name(value)) + " " + config_detail::brief_json(value) +
                         ". Example: {\"default\": {\"backend\": \"FLASH_ATTN\"}, \"per_role\": {\"cross\": "
                         "\"TORCH_SDPA\"}}.");
  }
  DIFFATTN_RETURN_IF_ERROR(config_detail::check_known_keys(value, kConfigKeys, "attention_config", "the top level"));
  if (value.contains("default") && !value.at("default").is_null()) {
    DIFFATTN_ASSIGN_OR_RETURN(config.default_spec, spec_from_json(value.at("default"), "default", registry));
  }
  if (value.contains("per_role") && !value.at("per_role").is_null()) {
    const json& per_role = value.at("per_role");
    if (!per_role.is_object()) {
      return field_error("per_role", "expected an object mapping roles to specs, got " +
                                         std::string(config_detail::json_type_name(per_role)) + " " +
                                         config_detail::brief_json(per_role) + ". Example: {\"cross\": \"TORCH_SDPA\"}.");
    }
    RoleFlattener flattener(config.per_role, registry);
    DIFFATTN_RETURN_IF_ERROR(flattener.flatten(per_role, "", 1));
  }
  return config;
}

Result<AttentionConfig> parse_attention_config_json(std::string_view text, const Registry& registry) {
  DIFFATTN_ASSIGN_OR_RETURN(json value, config_detail::parse_json_text(text, "--diffusion-attention-config"));
  return config_from_json(value, registry);
}

Result<std::optional<AttentionSpec>> parse_attention_spec_json(std::string_view text, std::string_view field,
                                                               const Registry& registry) {
  DIFFATTN_ASSIGN_OR_RETURN(json value, config_detail::parse_json_text(text, field));
  return spec_from_json(value, field, registry);
}

}  // namespace diffattn
