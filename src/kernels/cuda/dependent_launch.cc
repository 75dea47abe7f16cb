// DIFFATTN_DEPENDENT_LAUNCH, the switch of dependent launches (cuda/dependent_launch.cuh): a tuning
// knob, so a value it does not know warns once and leaves them on rather than failing calls.

#include "kernels/cuda/dependent_launch.h"

#include <cstdlib>
#include <string>

#include "common/name_hints.h"
#include "diffattn/log.h"

namespace diffattn::cuda {

bool dependent_launch_setting(const char* value) {
  if (value == nullptr || std::string(value) == "1") return true;
  if (std::string(value) == "0") return false;
  log_warning("DIFFATTN_DEPENDENT_LAUNCH: '" + bounded_echo(value) +
              "' is neither 0 nor 1; dependent launches stay on (set 0 to turn them off).");
  return true;
}

bool dependent_launch_enabled() {
  static const bool enabled = dependent_launch_setting(std::getenv("DIFFATTN_DEPENDENT_LAUNCH"));
  return enabled;
}

}  // namespace diffattn::cuda
