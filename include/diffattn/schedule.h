#pragma once
// The attention schedule (--diffusion-attention-schedule): named profiles, each a whole
// AttentionConfig, mapped to ranges of denoising steps or of normalised noise level. A step that no
// range covers runs under the base configuration (--diffusion-attention-config and its shorthands).

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "diffattn/config.h"
#include "diffattn/problem.h"
#include "diffattn/status.h"

namespace diffattn {

// Steps start, start+1, ..., end-1: `end` is exclusive, as in range(start, end). No end: every step
// from start on.
struct StepRange {
  std::int64_t start = 0;
  std::optional<std::int64_t> end;
  std::string profile;
  bool operator==(const StepRange&) const = default;
};

// Normalised noise levels low <= sigma < high in [0, 1]; a window whose high is 1 includes 1.
struct SigmaRange {
  double low = 0.0;
  double high = 1.0;
  std::string profile;
  bool operator==(const SigmaRange&) const = default;
};

struct AttentionSchedule {
  // Each profile is parsed by config_from_json; it does not inherit from the base configuration and
  // DIFFUSION_ATTENTION_BACKEND does not apply to it.
  std::map<std::string, AttentionConfig> profiles;
  std::vector<StepRange> steps;   // ordered by start, disjoint
  std::vector<SigmaRange> sigma;  // ordered by low, disjoint; a schedule has steps or sigma, not both

  bool by_sigma() const { return !sigma.empty(); }
  std::size_t range_count() const { return by_sigma() ? sigma.size() : steps.size(); }
  const std::string& range_profile(std::size_t range) const {
    return by_sigma() ? sigma[range].profile : steps[range].profile;
  }
  // The range (an index into steps, or into sigma) that covers the call, or nullopt for the base
  // configuration. A sigma schedule needs `step.sigma`; a call without it is an error.
  Result<std::optional<std::size_t>> range_for(const DenoisingStep& step) const;

  bool operator==(const AttentionSchedule&) const = default;
};

// {"profiles": {NAME: AttentionConfig}, "steps": [{"start", "end", "profile"}]} or with
// "sigma": [{"low", "high", "profile"}] instead of "steps". Checks every rule: key names and types,
// profile names (an ASCII letter, then letters, digits, '_' or '-'), every profile parsed as a
// configuration, ranges that name defined profiles, start >= 0 and end > start, 0 <= low < high <= 1,
// no overlaps, no profile left unused, steps and sigma not mixed. null, {} and a schedule without
// profiles and ranges give nullopt: no schedule. Profiles are checked against `registry`, as
// config_from_json.
Result<std::optional<AttentionSchedule>> schedule_from_json(const nlohmann::json& value, const Registry& registry);
// Prints back to a value that schedule_from_json reads to an equal schedule.
nlohmann::json schedule_to_json(const AttentionSchedule& schedule);

// "steps [10, end)" / "sigma [0.5, 1]": one range as the log and the report name it.
std::string schedule_range_text(const AttentionSchedule& schedule, std::size_t range);
// Every range of one profile, joined: "steps [0, 4), [20, end)".
std::string profile_ranges_text(const AttentionSchedule& schedule, std::string_view profile);
// What the schedule leaves to the base configuration: "steps [0, 10)", "sigma [0, 0.3)", or "" when
// it covers everything.
std::string base_ranges_text(const AttentionSchedule& schedule);

// The command-line surfaces of the schedule, as for ConfigSources: one JSON object (the text of
// --diffusion-attention-schedule, @FILE already read), then --diffusion-attention-schedule.<path>
// VALUE flags merged on top.
struct ScheduleSources {
  std::optional<std::string> json;
  std::vector<std::pair<std::string, std::string>> dotted;
  bool given() const { return json.has_value() || !dotted.empty(); }
};
Result<std::optional<AttentionSchedule>> parse_attention_schedule(const ScheduleSources& sources,
                                                                  const Registry& registry);

}  // namespace diffattn
