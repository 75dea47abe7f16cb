// The C interface's JSON views: configuration validated and normalised by the core (so bindings
// hold no second copy of the rules), and what a session or layer resolved to.

#include <mutex>
#include <string>

#include "capi/capi_internal.h"
#include "common/json_text.h"
#include "diffattn/builtin_backends.h"
#include "platform/tuning_record.h"

namespace {

using diffattn::capi::fail;
using diffattn::capi::guarded;
using diffattn::capi::null_argument;
using diffattn::capi::return_string;

}  // namespace

extern "C" {

int diffattn_exit_code(int code) {
  if (code < DIFFATTN_OK || code > DIFFATTN_INTERNAL) return 1;
  return diffattn::exit_code_for(static_cast<diffattn::ErrorCode>(static_cast<int>(code)));
}

diffattn_code diffattn_config_normalise(const char* config_json, char** out_json) {
  return guarded("diffattn_config_normalise", [&]() -> diffattn_code {
    if (config_json == nullptr) return null_argument("diffattn_config_normalise", "config_json");
    if (out_json == nullptr) return null_argument("diffattn_config_normalise", "out_json");
    auto config = diffattn::parse_attention_config_json(config_json, diffattn::global_registry());
    if (!config.ok()) return fail(config.status());
    return return_string("diffattn_config_normalise", diffattn::json_text(diffattn::config_to_json(*config)), out_json);
  });
}

diffattn_code diffattn_spec_normalise(const char* spec_json, const char* field, char** out_json) {
  return guarded("diffattn_spec_normalise", [&]() -> diffattn_code {
    if (spec_json == nullptr) return null_argument("diffattn_spec_normalise", "spec_json");
    if (out_json == nullptr) return null_argument("diffattn_spec_normalise", "out_json");
    auto spec =
        diffattn::parse_attention_spec_json(spec_json, field != nullptr ? field : "spec", diffattn::global_registry());
    if (!spec.ok()) return fail(spec.status());
    const nlohmann::json value = spec->has_value() ? diffattn::spec_to_json(**spec) : nlohmann::json(nullptr);
    return return_string("diffattn_spec_normalise", diffattn::json_text(value), out_json);
  });
}

diffattn_code diffattn_session_config(diffattn_session* session, char** out_json) {
  return guarded("diffattn_session_config", [&]() -> diffattn_code {
    if (session == nullptr) return null_argument("diffattn_session_config", "session");
    if (out_json == nullptr) return null_argument("diffattn_session_config", "out_json");
    std::shared_lock lock(session->mu);
    return return_string("diffattn_session_config", diffattn::json_text(diffattn::config_to_json(session->config)),
                         out_json);
  });
}

diffattn_code diffattn_session_platform(diffattn_session* session, char** out_json, char** out_description) {
  return guarded("diffattn_session_platform", [&]() -> diffattn_code {
    if (session == nullptr) return null_argument("diffattn_session_platform", "session");
    if (out_json == nullptr) return null_argument("diffattn_session_platform", "out_json");
    const diffattn::PlatformInfo& info = session->platform->info();
    char* json = nullptr;
    if (diffattn_code code = return_string("diffattn_session_platform", diffattn::json_text(diffattn::platform_to_json(info)), &json);
        code != DIFFATTN_OK)
      return code;
    if (out_description != nullptr) {
      if (diffattn_code code = return_string("diffattn_session_platform", info.describe(), out_description);
          code != DIFFATTN_OK) {
        diffattn_string_free(json);
        return code;
      }
    }
    *out_json = json;
    return DIFFATTN_OK;
  });
}

diffattn_code diffattn_session_tuning_warning(diffattn_session* session, const char* config_path, char** out_warning) {
  return guarded("diffattn_session_tuning_warning", [&]() -> diffattn_code {
    if (session == nullptr) return null_argument("diffattn_session_tuning_warning", "session");
    if (config_path == nullptr) return null_argument("diffattn_session_tuning_warning", "config_path");
    if (out_warning == nullptr) return null_argument("diffattn_session_tuning_warning", "out_warning");
    const auto warning = diffattn::tuned_elsewhere_warning(config_path, session->platform->info());
    return return_string("diffattn_session_tuning_warning", warning.value_or(""), out_warning);
  });
}

diffattn_code diffattn_layer_resolution(const diffattn_layer* layer, char** out_json) {
  return guarded("diffattn_layer_resolution", [&]() -> diffattn_code {
    if (layer == nullptr) return null_argument("diffattn_layer_resolution", "layer");
    if (out_json == nullptr) return null_argument("diffattn_layer_resolution", "out_json");
    return return_string("diffattn_layer_resolution",
                         diffattn::json_text(diffattn::resolution_to_json(layer->attention.resolution())), out_json);
  });
}

}  // extern "C"
