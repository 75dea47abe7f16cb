#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include "common/name_hints.h"
#include "diffattn/platform.h"
#include "platform/cudnn_version.h"

namespace diffattn {
namespace {

using nlohmann::json;

// "got null" for null (not "null null"); other values show their type and a bounded dump.
std::string given_text(const json& value) {
  if (value.is_null()) return "null";
  const std::string dump = value.dump(-1, ' ', false, json::error_handler_t::replace);
  return std::string(value.type_name()) + " " + bounded_echo(dump);
}

Status bad_key(std::string_view key, std::string_view expected, const json& value) {
  return InvalidConfig("platform description: '" + std::string(key) + "' must be " + std::string(expected) +
                       ", got " + given_text(value) + ".");
}

Status check_known_keys(const json& object, const std::set<std::string>& known, std::string_view prefix) {
  for (const auto& [key, value] : object.items()) {
    if (known.count(key)) continue;
    std::string list;
    for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
    return InvalidConfig("platform description: unknown key '" + std::string(prefix) + key + "'. Known keys: " +
                         list + ".");
  }
  return Status::Ok();
}

Status read_bool(const json& object, const char* key, std::string_view path, bool& out) {
  if (!object.contains(key)) return Status::Ok();
  const json& value = object.at(key);
  if (!value.is_boolean()) return bad_key(std::string(path) + key, "true or false", value);
  out = value.get<bool>();
  return Status::Ok();
}

Status read_string(const json& object, const char* key, std::string& out) {
  if (!object.contains(key)) return Status::Ok();
  const json& value = object.at(key);
  if (!value.is_string()) return bad_key(key, "a string", value);
  out = value.get<std::string>();
  return Status::Ok();
}

Status read_string_list(const json& object, const char* key, std::string_view path, std::vector<std::string>& out) {
  if (!object.contains(key)) return Status::Ok();
  const json& value = object.at(key);
  if (!value.is_array()) return bad_key(std::string(path) + key, "a list of strings", value);
  out.clear();
  for (const json& item : value) {
    if (!item.is_string()) return bad_key(std::string(path) + key, "a list of strings", value);
    out.push_back(item.get<std::string>());
  }
  return Status::Ok();
}

// FlashInfer is described by its version string; false (or "") says it is absent.
Status read_flashinfer(const json& features, std::string& out) {
  if (!features.contains("flashinfer")) return Status::Ok();
  const json& value = features.at("flashinfer");
  if (value.is_string()) {
    out = value.get<std::string>();
    return Status::Ok();
  }
  if (value.is_boolean() && !value.get<bool>()) {
    out.clear();
    return Status::Ok();
  }
  return bad_key("features.flashinfer", "a FlashInfer version string such as \"0.6.16\" (or false)", value);
}

// features.plugins lists the names of plugin backends; libraries are loaded with --plugin PATH,
// so a path here would be silently ignored.
Status check_plugin_names(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    const bool is_name = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    });
    if (is_name) continue;
    std::error_code ec;
    const bool looks_like_path = name.find('/') != std::string::npos || name.ends_with(".so");
    const std::string missing = looks_like_path && !std::filesystem::exists(name, ec) ? " (no such file)" : "";
    return InvalidConfig("platform description: 'features.plugins' lists plugin backend names such as MY_ATTN, but "
                         "holds '" + bounded_echo(name) + "'" + missing +
                         "; load a plugin library with --plugin PATH instead.");
  }
  return Status::Ok();
}

Status read_features(const json& value, PlatformFeatures& features) {
  if (!value.is_object()) return bad_key("features", "an object", value);
  DIFFATTN_RETURN_IF_ERROR(check_known_keys(value,
                                            {"flash_attn", "flash_attn_4", "flashinfer", "flashinfer_prefill",
                                             "trtllm_gen", "sage_attn", "sage_attn_3", "plugins"},
                                            "features."));
  DIFFATTN_RETURN_IF_ERROR(read_bool(value, "flash_attn", "features.", features.flash_attn));
  DIFFATTN_RETURN_IF_ERROR(read_bool(value, "flash_attn_4", "features.", features.flash_attn_4));
  DIFFATTN_RETURN_IF_ERROR(read_flashinfer(value, features.flashinfer));
  DIFFATTN_RETURN_IF_ERROR(read_bool(value, "flashinfer_prefill", "features.", features.flashinfer_prefill));
  DIFFATTN_RETURN_IF_ERROR(read_bool(value, "trtllm_gen", "features.", features.trtllm_gen));
  DIFFATTN_RETURN_IF_ERROR(read_bool(value, "sage_attn", "features.", features.sage_attn));
  DIFFATTN_RETURN_IF_ERROR(read_bool(value, "sage_attn_3", "features.", features.sage_attn_3));
  DIFFATTN_RETURN_IF_ERROR(read_string_list(value, "plugins", "features.", features.plugins));
  return check_plugin_names(features.plugins);
}

// CUDA compute capabilities run from 1.0 to 12.x today; a description beyond kMaxComputeMajor
// names no GPU that exists, so it is a typo rather than a plan for future hardware.
constexpr int kMaxComputeMajor = 15;

bool is_digits(std::string_view text) {
  return !text.empty() && text.size() <= 2 &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

Status read_compute_capability(const json& value, PlatformInfo& info) {
  const std::string expected = "a string \"MAJOR.MINOR\" with MAJOR 1 to " + std::to_string(kMaxComputeMajor) +
                               " and MINOR 0 to 9, such as \"9.0\"";
  if (!value.is_string()) return bad_key("compute_capability", expected, value);
  const std::string text = value.get<std::string>();
  const std::size_t dot = text.find('.');
  if (dot == std::string::npos || !is_digits(std::string_view(text).substr(0, dot)) ||
      text.size() != dot + 2 || !is_digits(std::string_view(text).substr(dot + 1)))
    return bad_key("compute_capability", expected, value);
  const int major = std::stoi(text.substr(0, dot)), minor = text[dot + 1] - '0';
  if (major < 1 || major > kMaxComputeMajor) return bad_key("compute_capability", expected, value);
  info.cc_major = major;
  info.cc_minor = minor;
  return Status::Ok();
}

Status read_cudnn_version(const json& value, PlatformInfo& info) {
  if (value.is_null()) {
    info.cudnn_version = 0;
  } else if (value.is_number_integer() && value.get<long long>() >= 0 && value.get<long long>() < 1000000) {
    const int number = static_cast<int>(value.get<long long>());
    // Only numbers cudnnGetVersion can report: 8xyz for cuDNN 8, MAJOR*10000 + ... from cuDNN 9.
    const Result<int> decoded = parse_cudnn_version(cudnn_version_string(number));
    if (number != 0 && (!decoded.ok() || *decoded != number))
      return bad_key("cudnn_version", "a version string such as \"9.5.0\" or an integer cudnnGetVersion reports, such as 90500 or 8907", value);
    info.cudnn_version = number;
  } else if (value.is_string()) {
    DIFFATTN_ASSIGN_OR_RETURN(info.cudnn_version, parse_cudnn_version(value.get<std::string>()));
  } else {
    return bad_key("cudnn_version", "a version string such as \"9.5.0\" or an integer such as 90500", value);
  }
  return Status::Ok();
}

}  // namespace

Result<PlatformInfo> platform_from_json(const json& value) {
  if (!value.is_object()) {
    return InvalidConfig("platform description must be a JSON object such as {\"kind\": \"cuda\", "
                         "\"compute_capability\": \"9.0\"}, got " + std::string(value.type_name()) + ".");
  }
  DIFFATTN_RETURN_IF_ERROR(check_known_keys(value,
                                            {"kind", "compute_capability", "device_name", "sm_count",
                                             "cudnn_version", "features", "compiled_archs", "origin"},
                                            ""));
  PlatformInfo info;
  info.origin = "description";
  if (!value.contains("kind")) {
    return InvalidConfig("platform description: 'kind' is required: \"cpu\" or \"cuda\".");
  }
  const json& kind = value.at("kind");
  if (kind == "cpu") {
    info.kind = PlatformKind::kCpu;
  } else if (kind == "cuda") {
    info.kind = PlatformKind::kCuda;
  } else {
    return bad_key("kind", "\"cpu\" or \"cuda\"", kind);
  }
  if (info.kind == PlatformKind::kCuda) {
    if (!value.contains("compute_capability")) {
      return InvalidConfig("platform description: 'compute_capability' is required for kind \"cuda\", e.g. \"9.0\".");
    }
    DIFFATTN_RETURN_IF_ERROR(read_compute_capability(value.at("compute_capability"), info));
    if (value.contains("cudnn_version")) DIFFATTN_RETURN_IF_ERROR(read_cudnn_version(value.at("cudnn_version"), info));
  } else {
    for (const char* key : {"compute_capability", "cudnn_version"}) {
      if (value.contains(key)) {
        return InvalidConfig("platform description: '" + std::string(key) +
                             "' applies to kind \"cuda\" only; remove it or set \"kind\": \"cuda\".");
      }
    }
  }
  DIFFATTN_RETURN_IF_ERROR(read_string(value, "device_name", info.device_name));
  DIFFATTN_RETURN_IF_ERROR(read_string(value, "origin", info.origin));
  if (value.contains("sm_count")) {
    const json& sm = value.at("sm_count");
    if (!sm.is_number_integer() || sm.get<long long>() < 0 || sm.get<long long>() > 100000) {
      return bad_key("sm_count", "a non-negative integer", sm);
    }
    info.sm_count = static_cast<int>(sm.get<long long>());
  }
  if (value.contains("features")) DIFFATTN_RETURN_IF_ERROR(read_features(value.at("features"), info.features));
  DIFFATTN_RETURN_IF_ERROR(read_string_list(value, "compiled_archs", "", info.compiled_archs));
  return info;
}

json platform_to_json(const PlatformInfo& info) {
  json out = json::object();
  out["kind"] = info.kind == PlatformKind::kCuda ? "cuda" : "cpu";
  if (info.kind == PlatformKind::kCuda) {
    out["compute_capability"] = std::to_string(info.cc_major) + "." + std::to_string(info.cc_minor);
    out["cudnn_version"] = info.cudnn_version > 0 ? json(cudnn_version_string(info.cudnn_version)) : json(nullptr);
  }
  out["device_name"] = info.device_name;
  out["sm_count"] = info.sm_count;
  const PlatformFeatures& f = info.features;
  out["features"] = {{"flash_attn", f.flash_attn},
                     {"flash_attn_4", f.flash_attn_4},
                     {"flashinfer", f.flashinfer.empty() ? json(false) : json(f.flashinfer)},
                     {"flashinfer_prefill", f.flashinfer_prefill},
                     {"trtllm_gen", f.trtllm_gen},
                     {"sage_attn", f.sage_attn},
                     {"sage_attn_3", f.sage_attn_3},
                     {"plugins", f.plugins}};
  out["compiled_archs"] = info.compiled_archs;
  out["origin"] = info.origin;
  return out;
}

}  // namespace diffattn
