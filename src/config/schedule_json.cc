// AttentionSchedule from one JSON object, every rule checked before anything runs, and printed back.

#include <algorithm>
#include <array>
#include <cctype>
#include <set>
#include <span>
#include <string>

#include "config/json_values.h"
#include "diffattn/schedule.h"

namespace diffattn {
namespace {

using config_detail::brief_json;
using config_detail::field_error;
using config_detail::json_type_name;
using config_detail::repr;
using nlohmann::json;

constexpr std::string_view kField = "attention_schedule";
constexpr std::array<std::string_view, 3> kScheduleKeys = {"profiles", "sigma", "steps"};
constexpr std::array<std::string_view, 3> kStepKeys = {"end", "profile", "start"};
constexpr std::array<std::string_view, 3> kSigmaKeys = {"high", "low", "profile"};

constexpr std::string_view kExample =
    "{\"profiles\": {\"dense\": {\"default\": \"TORCH_SDPA\"}, \"sparse\": {\"default\": \"SAGE_ATTN\"}}, "
    "\"steps\": [{\"start\": 0, \"end\": 10, \"profile\": \"dense\"}, {\"start\": 10, \"end\": null, "
    "\"profile\": \"sparse\"}]}";

std::string entry_field(std::string_view list, std::size_t i) {
  return std::string(kField) + "." + std::string(list) + "[" + std::to_string(i) + "]";
}

bool is_profile_name(std::string_view name) {
  if (name.empty() || !std::isalpha(static_cast<unsigned char>(name.front())) ||
      static_cast<unsigned char>(name.front()) > 127)
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 128 && (std::isalnum(u) || c == '_' || c == '-');
  });
}

// A profile's own configuration errors keep their text, prefixed with where the profile is.
Status in_profile(const Status& status, std::string_view name) {
  return Status(status.code(), std::string(kField) + ".profiles[" + repr(name) + "]: " + status.message());
}

Result<std::map<std::string, AttentionConfig>> read_profiles(const json& value, const Registry& registry) {
  std::map<std::string, AttentionConfig> profiles;
  if (value.is_null()) return profiles;
  if (!value.is_object()) {
    return field_error(std::string(kField) + ".profiles",
                       "expected an object mapping profile names to attention configurations, got " +
                           std::string(json_type_name(value)) + " " + brief_json(value) +
                           ". Example: {\"sparse\": {\"default\": \"SAGE_ATTN\"}}.");
  }
  for (const auto& item : value.items()) {
    DIFFATTN_RETURN_IF_ERROR(config_detail::check_utf8(item.key(), std::string(kField) + ".profiles", "a profile name"));
    if (!is_profile_name(item.key())) {
      return field_error(std::string(kField) + ".profiles",
                         "profile name " + repr(item.key()) +
                             " is not valid; start with an ASCII letter, then letters, digits, '_' or '-' (e.g. "
                             "\"dense\", \"sparse_late\").");
    }
    if (!item.value().is_object()) {
      return field_error(std::string(kField) + ".profiles[" + repr(item.key()) + "]",
                         "expected an attention configuration object, got " + std::string(json_type_name(item.value())) +
                             " " + brief_json(item.value()) + ". Write it as {\"default\": \"" +
                             (item.value().is_string() ? item.value().get<std::string>() : std::string("SAGE_ATTN")) +
                             "\"} (a whole configuration: default and per_role, as --diffusion-attention-config).");
    }
    Result<AttentionConfig> config = config_from_json(item.value(), registry);
    if (!config.ok()) return in_profile(config.status(), item.key());
    profiles.emplace(item.key(), std::move(config).value());
  }
  return profiles;
}

Result<const json*> read_list(const json& schedule, std::string_view key, std::string_view entry_example) {
  static const json kNull = nullptr;
  if (!schedule.contains(key) || schedule.at(key).is_null()) return &kNull;
  const json& list = schedule.at(key);
  if (!list.is_array()) {
    return field_error(std::string(kField) + "." + std::string(key),
                       "expected a list of ranges, got " + std::string(json_type_name(list)) + " " + brief_json(list) +
                           ". Write it as [" + std::string(entry_example) + ", ...].");
  }
  return &list;
}

Status check_entry_object(const json& entry, const std::string& field, std::span<const std::string_view> keys,
                          std::string_view example) {
  if (!entry.is_object()) {
    return field_error(field, "expected a range object such as " + std::string(example) + ", got " +
                                  std::string(json_type_name(entry)) + " " + brief_json(entry) + ".");
  }
  return config_detail::check_known_keys(entry, keys, field, "a range");
}

Result<std::string> read_profile_ref(const json& entry, const std::string& field,
                                     const std::map<std::string, AttentionConfig>& profiles) {
  if (!entry.contains("profile") || !entry.at("profile").is_string()) {
    const std::string got = entry.contains("profile") ? std::string(json_type_name(entry.at("profile"))) + " " +
                                                            brief_json(entry.at("profile"))
                                                      : std::string("nothing");
    return field_error(field, "profile must name one of the schedule's profiles (a string), got " + got + ".");
  }
  std::string name = entry.at("profile").get<std::string>();
  if (profiles.count(name) == 0) {
    std::string known;
    for (const auto& [n, config] : profiles) known += (known.empty() ? "" : ", ") + repr(n);
    return field_error(field, "unknown profile " + repr(name) + "; " +
                                  (known.empty() ? std::string("the schedule defines no profiles: add it under "
                                                               "profiles, e.g. \"profiles\": {" +
                                                               std::string(brief_json(json(name))) +
                                                               ": {\"default\": \"SAGE_ATTN\"}}")
                                                 : "defined: " + known + ". Use one of them or add it under profiles") +
                                  ".");
  }
  return name;
}

constexpr std::string_view kStepExample = "{\"start\": 10, \"end\": null, \"profile\": \"sparse\"}";
constexpr std::string_view kSigmaExample = "{\"low\": 0.0, \"high\": 0.3, \"profile\": \"sparse\"}";

Result<StepRange> read_step_range(const json& entry, const std::string& field,
                                  const std::map<std::string, AttentionConfig>& profiles) {
  DIFFATTN_RETURN_IF_ERROR(check_entry_object(entry, field, kStepKeys, kStepExample));
  StepRange range;
  if (!entry.contains("start")) return field_error(field, "start is required: the first step of the range (0-based).");
  DIFFATTN_ASSIGN_OR_RETURN(range.start, config_detail::read_integer(entry.at("start"), field, "start"));
  if (range.start < 0) return field_error(field, "start must be >= 0 (steps count from 0); got " + std::to_string(range.start) + ".");
  if (entry.contains("end") && !entry.at("end").is_null()) {
    DIFFATTN_ASSIGN_OR_RETURN(range.end, config_detail::read_integer(entry.at("end"), field, "end"));
    if (*range.end <= range.start) {
      return field_error(field, "end (" + std::to_string(*range.end) + ") must be greater than start (" +
                                    std::to_string(range.start) +
                                    "): end is exclusive, the range runs steps start..end-1. For the single step " +
                                    std::to_string(range.start) + " write \"end\": " + std::to_string(range.start + 1) +
                                    "; for every step from start on write \"end\": null.");
    }
  }
  DIFFATTN_ASSIGN_OR_RETURN(range.profile, read_profile_ref(entry, field, profiles));
  return range;
}

Result<SigmaRange> read_sigma_range(const json& entry, const std::string& field,
                                    const std::map<std::string, AttentionConfig>& profiles) {
  DIFFATTN_RETURN_IF_ERROR(check_entry_object(entry, field, kSigmaKeys, kSigmaExample));
  SigmaRange range;
  for (const char* key : {"low", "high"}) {
    if (!entry.contains(key)) return field_error(field, std::string(key) + " is required: a normalised noise level in [0, 1].");
  }
  DIFFATTN_ASSIGN_OR_RETURN(range.low, config_detail::read_number(entry.at("low"), field, "low"));
  DIFFATTN_ASSIGN_OR_RETURN(range.high, config_detail::read_number(entry.at("high"), field, "high"));
  const bool in_unit = range.low >= 0.0 && range.high <= 1.0;
  if (!in_unit || !(range.low < range.high)) {
    return field_error(field, "needs 0 <= low < high <= 1 (normalised noise level; the window is [low, high), and "
                              "includes 1 when high is 1); got low " + config_detail::format_number(range.low) +
                                  ", high " + config_detail::format_number(range.high) + ".");
  }
  DIFFATTN_ASSIGN_OR_RETURN(range.profile, read_profile_ref(entry, field, profiles));
  return range;
}

std::string end_text(const std::optional<std::int64_t>& end) { return end ? std::to_string(*end) : "end"; }

Status check_steps_disjoint(const std::vector<StepRange>& steps) {
  for (std::size_t i = 1; i < steps.size(); ++i) {
    const StepRange& a = steps[i - 1];
    const StepRange& b = steps[i];
    if (!a.end || *a.end > b.start) {
      return field_error(std::string(kField) + ".steps",
                         "ranges overlap: [" + std::to_string(a.start) + ", " + end_text(a.end) + ") (profile " +
                             repr(a.profile) + ") and [" + std::to_string(b.start) + ", " + end_text(b.end) +
                             ") (profile " + repr(b.profile) + ") both cover step " + std::to_string(b.start) +
                             ". End is exclusive: end the first range at " + std::to_string(b.start) +
                             " or start the second later, so that each step has one profile.");
    }
  }
  return Status::Ok();
}

Status check_sigma_disjoint(const std::vector<SigmaRange>& sigma) {
  for (std::size_t i = 1; i < sigma.size(); ++i) {
    const SigmaRange& a = sigma[i - 1];
    const SigmaRange& b = sigma[i];
    if (a.high > b.low) {
      return field_error(std::string(kField) + ".sigma",
                         "windows overlap: [" + config_detail::format_number(a.low) + ", " +
                             config_detail::format_number(a.high) + ") (profile " + repr(a.profile) + ") and [" +
                             config_detail::format_number(b.low) + ", " + config_detail::format_number(b.high) +
                             ") (profile " + repr(b.profile) + "). Windows are [low, high): let the first end at " +
                             config_detail::format_number(b.low) + " or the second start at " +
                             config_detail::format_number(a.high) + ".");
    }
  }
  return Status::Ok();
}

Status check_every_profile_used(const AttentionSchedule& schedule) {
  std::set<std::string> used;
  for (std::size_t i = 0; i < schedule.range_count(); ++i) used.insert(schedule.range_profile(i));
  for (const auto& [name, config] : schedule.profiles) {
    if (used.count(name) == 0) {
      return field_error(std::string(kField) + ".profiles[" + repr(name) + "]",
                         "no range uses this profile; map it to steps (\"steps\": [{\"start\": 10, \"end\": null, "
                         "\"profile\": " + brief_json(json(name)) + "}]) or remove it.");
    }
  }
  return Status::Ok();
}

std::string format_sigma(double v) { return config_detail::format_number(v); }

}  // namespace

Result<std::optional<std::size_t>> AttentionSchedule::range_for(const DenoisingStep& step) const {
  if (by_sigma()) {
    if (!step.sigma) {
      return InvalidInput("the attention schedule maps noise levels (sigma) to profiles, but the call at step " +
                          std::to_string(step.index) +
                          " carries no sigma; set DenoisingStep.sigma (normalised, in [0, 1]) or schedule by steps.");
    }
    const double s = *step.sigma;
    if (!(s >= 0.0 && s <= 1.0)) {
      return InvalidInput("the attention schedule's sigma windows are normalised noise levels in [0, 1], but the call "
                          "at step " + std::to_string(step.index) + " carries sigma " + config_detail::format_number(s) +
                          "; divide by the schedule's largest sigma first.");
    }
    for (std::size_t i = 0; i < sigma.size(); ++i) {
      if ((s >= sigma[i].low && s < sigma[i].high) || (s == 1.0 && sigma[i].high == 1.0)) return std::optional(i);
    }
    return std::optional<std::size_t>();
  }
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (step.index >= steps[i].start && (!steps[i].end || step.index < *steps[i].end)) return std::optional(i);
  }
  return std::optional<std::size_t>();
}

Result<std::optional<AttentionSchedule>> schedule_from_json(const json& value, const Registry& registry) {
  if (value.is_null()) return std::optional<AttentionSchedule>();
  if (!value.is_object()) {
    return InvalidConfig("the attention schedule must be a JSON object with keys profiles and steps (or sigma); got " +
                         std::string(json_type_name(value)) + " " + brief_json(value) + ". Example: " +
                         std::string(kExample) + ".");
  }
  DIFFATTN_RETURN_IF_ERROR(config_detail::check_known_keys(value, kScheduleKeys, kField, "the top level"));
  AttentionSchedule schedule;
  DIFFATTN_ASSIGN_OR_RETURN(schedule.profiles,
                            read_profiles(value.contains("profiles") ? value.at("profiles") : json(), registry));
  DIFFATTN_ASSIGN_OR_RETURN(const json* steps, read_list(value, "steps", kStepExample));
  DIFFATTN_ASSIGN_OR_RETURN(const json* sigma, read_list(value, "sigma", kSigmaExample));
  if (!steps->empty() && !sigma->empty()) {
    return field_error(kField, "steps and sigma cannot be mixed: a schedule maps either denoising steps or noise "
                               "levels to profiles. Keep one list (each step then has exactly one profile).");
  }
  for (std::size_t i = 0; i < steps->size(); ++i) {
    DIFFATTN_ASSIGN_OR_RETURN(StepRange r, read_step_range((*steps)[i], entry_field("steps", i), schedule.profiles));
    schedule.steps.push_back(std::move(r));
  }
  for (std::size_t i = 0; i < sigma->size(); ++i) {
    DIFFATTN_ASSIGN_OR_RETURN(SigmaRange r, read_sigma_range((*sigma)[i], entry_field("sigma", i), schedule.profiles));
    schedule.sigma.push_back(std::move(r));
  }
  std::stable_sort(schedule.steps.begin(), schedule.steps.end(),
                   [](const StepRange& a, const StepRange& b) { return a.start < b.start; });
  std::stable_sort(schedule.sigma.begin(), schedule.sigma.end(),
                   [](const SigmaRange& a, const SigmaRange& b) { return a.low < b.low; });
  DIFFATTN_RETURN_IF_ERROR(check_steps_disjoint(schedule.steps));
  DIFFATTN_RETURN_IF_ERROR(check_sigma_disjoint(schedule.sigma));
  DIFFATTN_RETURN_IF_ERROR(check_every_profile_used(schedule));
  if (schedule.profiles.empty()) return std::optional<AttentionSchedule>();
  return std::optional<AttentionSchedule>(std::move(schedule));
}

json schedule_to_json(const AttentionSchedule& schedule) {
  json out = json::object();
  json profiles = json::object();
  for (const auto& [name, config] : schedule.profiles) profiles[name] = config_to_json(config);
  out["profiles"] = std::move(profiles);
  if (schedule.by_sigma()) {
    json sigma = json::array();
    for (const SigmaRange& r : schedule.sigma) sigma.push_back({{"low", r.low}, {"high", r.high}, {"profile", r.profile}});
    out["sigma"] = std::move(sigma);
  } else {
    json steps = json::array();
    for (const StepRange& r : schedule.steps)
      steps.push_back({{"start", r.start}, {"end", r.end ? json(*r.end) : json(nullptr)}, {"profile", r.profile}});
    out["steps"] = std::move(steps);
  }
  return out;
}

std::string schedule_range_text(const AttentionSchedule& schedule, std::size_t range) {
  if (schedule.by_sigma()) {
    const SigmaRange& r = schedule.sigma[range];
    return "sigma [" + format_sigma(r.low) + ", " + format_sigma(r.high) + (r.high == 1.0 ? "]" : ")");
  }
  const StepRange& r = schedule.steps[range];
  return "steps [" + std::to_string(r.start) + ", " + end_text(r.end) + ")";
}

std::string profile_ranges_text(const AttentionSchedule& schedule, std::string_view profile) {
  std::string out;
  for (std::size_t i = 0; i < schedule.range_count(); ++i) {
    if (schedule.range_profile(i) != profile) continue;
    const std::string text = schedule_range_text(schedule, i);
    // "steps [0, 4), [20, end)": the unit is named once.
    out += out.empty() ? text : ", " + text.substr(text.find('['));
  }
  return out;
}

std::string base_ranges_text(const AttentionSchedule& schedule) {
  std::vector<std::string> gaps;
  if (schedule.by_sigma()) {
    double covered = 0.0;
    for (const SigmaRange& r : schedule.sigma) {
      if (r.low > covered) gaps.push_back("[" + format_sigma(covered) + ", " + format_sigma(r.low) + ")");
      covered = r.high;
    }
    if (covered < 1.0) gaps.push_back("[" + format_sigma(covered) + ", 1]");
  } else {
    std::optional<std::int64_t> covered = 0;
    for (const StepRange& r : schedule.steps) {
      if (r.start > *covered) gaps.push_back("[" + std::to_string(*covered) + ", " + std::to_string(r.start) + ")");
      covered = r.end;
      if (!covered) break;
    }
    if (covered) gaps.push_back("[" + std::to_string(*covered) + ", end)");
  }
  std::string out;
  for (const std::string& g : gaps) out += (out.empty() ? "" : ", ") + g;
  return out.empty() ? out : (schedule.by_sigma() ? "sigma " : "steps ") + out;
}

}  // namespace diffattn
