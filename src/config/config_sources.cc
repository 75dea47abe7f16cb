// Combining the command-line surfaces: JSON, dotted flags on top, the backend shorthand, the
// FastVideo top-k flag, and (in build_attention_config only) the environment.

#include <string>

#include "config/block_owners.h"
#include "config/dotted_flags.h"
#include "config/json_values.h"
#include "diffattn/config.h"
#include "diffattn/log.h"

namespace diffattn {
namespace {

using nlohmann::json;

Result<json> config_root(const ConfigSources& sources) {
  json root = json::object();
  if (sources.config_json) {
    DIFFATTN_ASSIGN_OR_RETURN(root, config_detail::parse_json_text(*sources.config_json, "--diffusion-attention-config"));
    if (root.is_null()) root = json::object();
    if (!root.is_object()) {
      return InvalidConfig("--diffusion-attention-config must be a JSON object with keys default and per_role; got " +
                           std::string(config_detail::json_type_name(root)) + " " + config_detail::brief_json(root) +
                           ". For a single backend use --diffusion-attention-backend NAME.");
    }
  }
  DIFFATTN_RETURN_IF_ERROR(config_detail::merge_dotted_flags(root, sources.dotted));
  return root;
}

Result<AttentionSpec> spec_from_backend_name(const std::string& name, std::string_view source,
                                             const Registry& registry) {
  if (!config_detail::is_valid_utf8(name)) return InvalidConfig(std::string(source) + " is not valid UTF-8.");
  DIFFATTN_ASSIGN_OR_RETURN(std::optional<AttentionSpec> spec, spec_from_json(json(name), source, registry));
  if (!spec) return Internal(std::string(source) + ": 'auto' reached spec_from_backend_name");
  return std::move(*spec);
}

bool is_auto(std::string_view name) { return ascii_lower(name) == "auto"; }

Status apply_shorthand(AttentionConfig& config, const std::optional<std::string>& shorthand, const Registry& registry) {
  if (!shorthand) return Status::Ok();
  // Checked before "auto" is dropped: the two flags conflict whatever the shorthand says.
  if (config.default_spec) {
    return InvalidConfig(
        "--diffusion-attention-backend is mutually exclusive with --diffusion-attention-config.default.backend. "
        "Keep one of them: drop --diffusion-attention-backend, or remove default from --diffusion-attention-config "
        "(per_role entries may stay).");
  }
  if (is_auto(*shorthand)) return Status::Ok();
  DIFFATTN_ASSIGN_OR_RETURN(AttentionSpec spec,
                            spec_from_backend_name(*shorthand, "--diffusion-attention-backend", registry));
  config.default_spec = std::move(spec);
  config.default_origin = DefaultOrigin::kShorthand;
  return Status::Ok();
}

Status apply_fastvideo_vsa_topk(AttentionConfig& config, std::optional<std::int64_t> topk, const Registry& registry) {
  if (!topk) return Status::Ok();
  // The backends that declare the fastvideo_vsa_topk block are the ones the flag may go with.
  const config_detail::BlockOwners owners = config_detail::block_owners("fastvideo_vsa_topk", registry);
  const std::string owner_names = join(owners.backends, " or ");
  if (!config.default_spec) {
    return InvalidConfig("--fastvideo-vsa-topk requires --diffusion-attention-backend " + owner_names + ".");
  }
  if (!config_detail::owns_block(owners, config.default_spec->backend)) {
    return InvalidConfig("--fastvideo-vsa-topk is only valid with the " + owner_names +
                         " backend, but the default backend is " + config_detail::repr(config.default_spec->backend) +
                         ". Remove --fastvideo-vsa-topk or use --diffusion-attention-backend " + owner_names + ".");
  }
  config.default_spec->fastvideo_vsa_topk = *topk;
  return validate_spec(*config.default_spec, "--fastvideo-vsa-topk", registry);
}

std::string role_list(const AttentionConfig& config) {
  std::string out = "{";
  for (const auto& [role, spec] : config.per_role) {
    out += (out.size() > 1 ? ", " : "") + config_detail::repr(role) + ": " + spec.backend;
  }
  return out + "}";
}

}  // namespace

Result<AttentionConfig> parse_attention_config(const ConfigSources& sources, const Registry& registry) {
  DIFFATTN_ASSIGN_OR_RETURN(json root, config_root(sources));
  DIFFATTN_ASSIGN_OR_RETURN(AttentionConfig config, config_from_json(root, registry));
  DIFFATTN_RETURN_IF_ERROR(apply_shorthand(config, sources.backend_shorthand, registry));
  DIFFATTN_RETURN_IF_ERROR(apply_fastvideo_vsa_topk(config, sources.fastvideo_vsa_topk, registry));
  return config;
}

Result<AttentionConfig> build_attention_config(const ConfigSources& sources, std::optional<std::string> env_backend,
                                               const Registry& registry) {
  DIFFATTN_ASSIGN_OR_RETURN(AttentionConfig config, parse_attention_config(sources, registry));
  if (config.default_spec) return config;
  // Deliberate: an explicit "--diffusion-attention-backend auto" on the command line means "platform
  // default" and is not overridden by a DIFFUSION_ATTENTION_BACKEND left in the environment.
  if (sources.backend_shorthand) return config;
  if (!env_backend || env_backend->empty() || is_auto(*env_backend)) return config;
  DIFFATTN_ASSIGN_OR_RETURN(AttentionSpec spec,
                            spec_from_backend_name(*env_backend, "DIFFUSION_ATTENTION_BACKEND", registry));
  config.default_spec = std::move(spec);
  config.default_origin = DefaultOrigin::kEnv;
  log_info("Parsed attention config from DIFFUSION_ATTENTION_BACKEND " + config_detail::repr(*env_backend) +
           ": default=" + config.default_spec->backend + ", per_role=" + role_list(config));
  return config;
}

}  // namespace diffattn
