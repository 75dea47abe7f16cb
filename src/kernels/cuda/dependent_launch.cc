// DIFFATTN_DEPENDENT_LAUNCH, the switch of cuda/dependent_launch.cuh: a tuning knob, so a value it
// does not know warns once and leaves dependent launches on rather than failing calls.

#include <cstdlib>
#include <string>

#include "common/name_hints.h"
#include "diffattn/log.h"

namespace diffattn::cuda {
namespace {

bool from_env() {
  const char* env = std::getenv("DIFFATTN_DEPENDENT_LAUNCH");
  if (env == nullptr || std::string(env) == "1") return true;
  if (std::string(env) == "0") return false;
  log_warning("DIFFATTN_DEPENDENT_LAUNCH: '" + bounded_echo(env) +
              "' is neither 0 nor 1; dependent launches stay on (set 0 to turn them off).");
  return true;
}

}  // namespace

bool dependent_launch_enabled() {
  static const bool enabled = from_env();
  return enabled;
}

}  // namespace diffattn::cuda
