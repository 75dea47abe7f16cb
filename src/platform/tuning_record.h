#pragma once
// The tuning record `diffattn tune` writes beside a configuration (FILE.json -> FILE.tuning.json),
// read back to warn when a configuration is used on another platform than it was tuned on. In the
// core so that the command-line tool and the C interface (and through it Python) give one warning.

#include <optional>
#include <string>

#include "diffattn/platform.h"

namespace diffattn {

// FILE.json -> FILE.tuning.json (any other name gets ".tuning.json" appended).
std::string tuning_record_path(const std::string& config_path);

// A warning when the record beside `config_path` names another device, compute capability or cuDNN
// than `current` (or cannot be read); nullopt when they agree or there is no record.
std::optional<std::string> tuned_elsewhere_warning(const std::string& config_path, const PlatformInfo& current);

}  // namespace diffattn
