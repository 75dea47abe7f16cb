#include "diffattn/platform.h"
#include "platform/cudnn_version.h"

namespace diffattn {

std::string PlatformInfo::sm_string() const {
  if (kind != PlatformKind::kCuda) return "";
  return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
}

std::string PlatformInfo::describe() const {
  if (kind == PlatformKind::kCpu) return "CPU (" + (device_name.empty() ? std::string("unknown") : device_name) + ")";
  std::string out = (device_name.empty() ? std::string("CUDA device") : device_name) + " (" + sm_string();
  if (sm_count > 0) out += ", " + std::to_string(sm_count) + " SMs";
  out += cudnn_version > 0 ? ", cuDNN " + cudnn_version_string(cudnn_version) : std::string(", no cuDNN");
  return out + ")";
}

}  // namespace diffattn
